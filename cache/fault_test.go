package cache

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
)

// TestTruncatedWhileMapped cuts a shard short while a read-only cache has it mapped:
// reading a record past the new end, whether Read's checksums or Decode's codec touches
// the missing pages first, is an ErrCorrupt error naming the shard, not a fatal fault;
// records before the cut still read, and later reads of the shard fail the same way.
func TestTruncatedWhileMapped(t *testing.T) {
	for _, codec := range []Codec{Raw, S2, Zstd, JPEG} {
		t.Run(string(codec), func(t *testing.T) {
			dir := t.TempDir()
			const n, w = 8, 64 // 12 KiB records: several pages each
			refs := fill(t, dir, Options{Codec: codec}, n, w)
			ro := open(t, dir, Options{ReadOnly: true})
			d := newCoder(t, ro)
			var img decode.Image
			// Payloads read (mapped) before the cut, decoded after it.
			early, rrefs := make([][]byte, n), make([]Ref, n)
			for i := range n {
				rrefs[i] = mustRef(t, ro, testKey(i))
				p, err := ro.Read(rrefs[i], nil)
				if err != nil {
					t.Fatal(err)
				}
				early[i] = p
			}
			// A second cache, mapped too, whose reads after the cut fault in Read.
			ro2 := open(t, dir, Options{ReadOnly: true})
			d2 := newCoder(t, ro2)
			shard := filepath.Join(dir, refs[0].Shard())
			cut := refs[n/2].off + 1
			if err := os.Truncate(shard, cut); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				r := refs[i]
				_, err := d.Decode(&img, rrefs[i], early[i])
				wantBad := r.off+int64(r.Bytes) > cut-1
				if wantBad != (err != nil) {
					t.Fatalf("record %d (end %d, cut at %d): Decode error %v", i, r.off+int64(r.Bytes), cut, err)
				}
				if err != nil && (!errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), r.Shard())) {
					t.Fatalf("record %d: %v, want ErrCorrupt naming %s", i, err, r.Shard())
				}
			}
			for i := n - 1; i >= 0; i-- {
				r := mustRef(t, ro2, testKey(i))
				_, err := d2.Load(&img, r)
				if wantBad := r.off+int64(r.Bytes) > cut-1; wantBad != (err != nil) {
					t.Fatalf("record %d of the second cache: Load error %v", i, err)
				}
				if i == n-1 && (!errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "truncated or replaced while open")) {
					t.Fatalf("first read past the cut: %v, want a fault turned into ErrCorrupt", err)
				}
			}
			// Later reads of the records past the cut fail too.
			for i := n / 2; i < n; i++ {
				if _, err := d.Load(&img, rrefs[i]); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Load of record %d past the cut: %v, want ErrCorrupt", i, err)
				}
			}
		})
	}
}
