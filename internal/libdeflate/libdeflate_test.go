package libdeflate

import (
	"bytes"
	"compress/zlib"
	"errors"
	"math/rand/v2"
	"testing"
)

func decompressor(t testing.TB) *Decompressor {
	t.Helper()
	l, err := Load()
	if err != nil {
		t.Skipf("libdeflate not available, so its inflater cannot be tested: %v", err)
	}
	d, err := l.NewDecompressor()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

func deflate(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func TestZlib(t *testing.T) {
	d := decompressor(t)
	rng := rand.New(rand.NewPCG(1, 2))
	raw := make([]byte, 100000)
	for i := range raw {
		raw[i] = byte(rng.IntN(8) + i/1000) // compressible, not trivially
	}
	z := deflate(t, raw)
	out := make([]byte, len(raw))
	if err := d.Zlib(out, z); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, raw) {
		t.Fatal("inflated bytes differ")
	}
	bad := append([]byte{}, z...)
	bad[len(bad)-1] ^= 1 // Adler-32
	for name, tc := range map[string]struct{ out, in []byte }{
		"short output": {make([]byte, len(raw)-1), z},
		"long output":  {make([]byte, len(raw)+1), z},
		"truncated":    {make([]byte, len(raw)), z[:len(z)/2]},
		"checksum":     {make([]byte, len(raw)), bad},
		"empty":        {make([]byte, len(raw)), nil},
	} {
		if err := d.Zlib(tc.out, tc.in); !errors.Is(err, ErrData) {
			t.Errorf("%s: %v", name, err)
		}
	}
	d.Close()
	if err := d.Zlib(out, z); err == nil {
		t.Error("closed decompressor worked")
	}
}

func FuzzZlib(f *testing.F) {
	f.Add(deflate(f, []byte("hello, hello, hello")), 19)
	d := decompressor(f)
	f.Fuzz(func(t *testing.T, in []byte, n int) {
		if n <= 0 || n > 1<<20 {
			return
		}
		_ = d.Zlib(make([]byte, n), in)
	})
}
