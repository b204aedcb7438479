package cache

import (
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
)

// TestAllocs measures the allocations of a warm Coder: a cache hit (Lookup and Load into
// a reused Image) and a Put of a lossless record allocate nothing. JPEG records go
// through image/jpeg, which allocates; their counts are only logged.
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	for _, codec := range Codecs {
		t.Run(string(codec), func(t *testing.T) {
			dir := t.TempDir()
			c := open(t, dir, Options{Codec: codec})
			d := newCoder(t, c)
			src := testImage(1, 64, 48, codec.Lossless())
			keys := []Key{testKey(1), testKey(2)}
			for _, k := range keys {
				put(t, d, k, 0, src)
			}
			// A read-only cache reads from its mapping of the shard.
			ro := open(t, dir, Options{ReadOnly: true})
			rd := newCoder(t, ro)
			var rdst decode.Image
			j := 0
			roHit := testing.AllocsPerRun(100, func() {
				j++
				r, ok := ro.Lookup(keys[j%2])
				if !ok {
					t.Fatal("miss")
				}
				if _, err := rd.Load(&rdst, r); err != nil {
					t.Fatal(err)
				}
			})
			var dst decode.Image
			i := 0
			hit := testing.AllocsPerRun(100, func() {
				i++
				r, ok := c.Lookup(keys[i%2])
				if !ok {
					t.Fatal("miss")
				}
				if _, err := d.Load(&dst, r); err != nil {
					t.Fatal(err)
				}
			})
			img := testImage(2, 64, 48, codec.Lossless())
			k := testKey(3)
			store := testing.AllocsPerRun(100, func() {
				k.ModTime++
				if err := d.Put(k, 0, img); err != nil {
					t.Fatal(err)
				}
			})
			t.Logf("%s: %.0f allocations per hit (Lookup and Load), %.0f read-only, %.0f per Put", codec, hit, roHit, store)
			if codec.Lossless() && (hit != 0 || roHit != 0 || store != 0) {
				t.Errorf("%s: a hit allocates %.0f times (%.0f read-only), a Put %.0f; want 0", codec, hit, roHit, store)
			}
		})
	}
}
