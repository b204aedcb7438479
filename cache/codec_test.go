package cache

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
	"github.com/klauspost/compress/zstd"
)

// TestDecodeRejects gives Decode payloads that do not match their record: each is
// ErrCorrupt, without reserving memory for what the payload or header claims.
func TestDecodeRejects(t *testing.T) {
	c := open(t, t.TempDir(), Options{})
	enc := newCoder(t, c)
	payload := func(codec Codec, w, h int) []byte {
		p, err := enc.encode(nil, codec, testImage(1, w, h, false))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	plainZstd, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	noFCS := plainZstd.EncodeAll(make([]byte, 48), nil) // a frame under 256 bytes names no size
	plainZstd.Close()
	const huge = 20000 // 20000×20000 is over decode.DefaultMaxPixels
	hugeS2 := binary.AppendUvarint(nil, 3*huge*huge)
	hugeS2 = append(hugeS2, make([]byte, 64)...)
	sh := &shard{name: "test"}
	for _, tc := range []struct {
		name    string
		codec   Codec
		w, h    uint32
		payload []byte
	}{
		{"raw short", Raw, 4, 4, payload(Raw, 4, 3)},
		{"raw long", Raw, 4, 4, payload(Raw, 4, 5)},
		{"s2 of another size", S2, 4, 4, payload(S2, 5, 4)},
		{"s2 truncated", S2, 8, 8, payload(S2, 8, 8)[:20]},
		{"s2 as raw", Raw, 4, 4, payload(S2, 4, 4)},
		{"zstd of another size", Zstd, 4, 4, payload(Zstd, 4, 5)},
		{"zstd without a content size", Zstd, 4, 4, noFCS},
		{"zstd truncated", Zstd, 30, 30, payload(Zstd, 30, 30)[:20]},
		{"zstd as s2", S2, 4, 4, payload(Zstd, 4, 4)},
		{"jpeg of another size", JPEG, 8, 8, payload(JPEG, 8, 9)},
		{"jpeg truncated", JPEG, 8, 8, payload(JPEG, 8, 8)[:100]},
		{"not jpeg", JPEG, 4, 4, payload(Raw, 4, 4)},
		{"empty", S2, 1, 1, nil},
		{"unknown codec", "png", 1, 1, payload(Raw, 1, 1)},
		{"huge s2", S2, huge, huge, hugeS2},
		{"huge raw", Raw, 1 << 31, 1 << 31, nil},
		{"huge zstd", Zstd, huge, huge, payload(Zstd, 4, 4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newCoder(t, c)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			img, err := d.Decode(new(decode.Image), Ref{Path: "x.jpg", Codec: tc.codec, Width: tc.w, Height: tc.h, sh: sh}, tc.payload)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("Decode = %v, %v; want ErrCorrupt", img, err)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
				t.Errorf("Decode allocated %d MB for a bad payload", n>>20)
			}
		})
	}
}

// TestDecodeNilDst decodes each codec into a nil Image, as decode.Decoder.Decode allows.
func TestDecodeNilDst(t *testing.T) {
	c := open(t, t.TempDir(), Options{})
	d := newCoder(t, c)
	want := testImage(3, 9, 7, false)
	for _, codec := range Codecs {
		p, err := d.encode(nil, codec, want)
		if err != nil {
			t.Fatal(err)
		}
		img, err := d.Decode(nil, Ref{Codec: codec, Width: 9, Height: 7, sh: &shard{}}, p)
		if err != nil {
			t.Fatalf("%s: %v", codec, err)
		}
		if codec.Lossless() {
			if diff := samePixels(img, want); diff != "" {
				t.Errorf("%s: %s", codec, diff)
			}
		} else if e := meanAbsDiff(img, want); e > 3 {
			t.Errorf("%s: mean absolute error %.2f", codec, e)
		}
	}
}
