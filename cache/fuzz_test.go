package cache

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
)

// FuzzParseHeader feeds arbitrary bytes to the parsers of the on-disk structures. A
// header that parses must encode back to one that parses the same.
func FuzzParseHeader(f *testing.F) {
	h := header{id: testKey(1).ID(), label: -3, width: 7, height: 9, srcSize: 1 << 40, srcMtime: -1, payloadLen: 100, payloadCRC: 0xdeadbeef, path: "a/b/c.jpg"}
	hb := make([]byte, h.size())
	h.put(hb)
	f.Add(hb)
	f.Add(appendIndexEntry(nil, 1234, hb))
	f.Add(encodeShardHeader(Zstd, testSpec))
	f.Add(encodeShardHeader(Raw, ""))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		checkParsers(t, b)
		// Random bytes rarely pass a CRC: parse them again with their checksums repaired.
		fixed := bytes.Clone(b)
		le := binary.LittleEndian
		if len(fixed) >= recordFixed {
			le.PutUint32(fixed, recordMagic)
			if n := recordFixed + int(le.Uint16(fixed[60:])); n <= len(fixed) {
				le.PutUint32(fixed[4:], checksum(fixed[8:n]))
				if _, need, err := parseHeader(fixed); err != nil || need != 0 {
					t.Fatalf("a header with a good checksum: %d, %v", need, err)
				}
			}
		}
		checkParsers(t, fixed)
		checkParsers(t, appendIndexEntry(nil, int64(len(b)), fixed))
		if len(fixed) >= 32 {
			copy(fixed, shardMagic)
			le.PutUint32(fixed[16:], FormatVersion)
			id := le.Uint32(fixed[20:]) % uint32(len(Codecs)+1) // one id in five is unknown
			le.PutUint32(fixed[20:], id)
			le.PutUint32(fixed[24:], le.Uint32(fixed[24:])%uint32(len(fixed)-31))
			n := 32 + int(le.Uint32(fixed[24:]))
			le.PutUint32(fixed[n-4:], checksum(fixed[:n-4]))
			if _, _, _, need, err := parseShardHeader(fixed); need != 0 || (err == nil) != (id < uint32(len(Codecs))) {
				t.Fatalf("a shard header with a good checksum and codec id %d: %d, %v", id, need, err)
			}
			checkParsers(t, fixed)
		}
	})
}

// checkParsers runs every parser of on-disk structures on b.
func checkParsers(t *testing.T, b []byte) {
	if h, need, err := parseHeader(b); err == nil && need == 0 {
		if h.size() > len(b) {
			t.Fatalf("header of %d bytes parsed from %d", h.size(), len(b))
		}
		b2 := make([]byte, h.size())
		h.put(b2)
		if h2, need, err := parseHeader(b2); err != nil || need != 0 || h2 != h {
			t.Fatalf("re-encoded header parses as %+v, %d, %v; want %+v", h2, need, err, h)
		}
	} else if need > 0 && (need <= len(b) || err != nil) {
		t.Fatalf("parseHeader asks for %d bytes of %d, err %v", need, len(b), err)
	}
	if _, h, n, err := parseIndexEntry(b); err == nil && n > 0 && n != idxFixed+h.size() || n > len(b) {
		t.Fatalf("index entry of %d bytes parsed from %d", n, len(b))
	}
	if codec, spec, n, need, err := parseShardHeader(b); err == nil && need == 0 {
		if n > len(b) || !bytes.Equal(encodeShardHeader(codec, spec), b[:n]) {
			t.Fatalf("shard header %q/%q of %d bytes does not encode back to its %d bytes", codec, spec, n, len(b))
		}
	} else if need > 0 && need <= len(b) {
		t.Fatalf("parseShardHeader asks for %d bytes of %d", need, len(b))
	}
}

// FuzzDecodeRecord feeds arbitrary payloads to Coder.Decode for records of at most 64×64
// pixels: it must fail with an error, never panic or return an image of another size.
func FuzzDecodeRecord(f *testing.F) {
	c, err := Open(f.TempDir(), nil)
	if err != nil {
		f.Fatal(err)
	}
	defer c.Close()
	enc := c.NewCoder()
	for i, codec := range Codecs {
		img := testImage(uint64(i), 5+i, 4, false)
		p, err := enc.encode(nil, codec, img)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), uint8(img.Width), uint8(img.Height), uint8(1), uint8(3), p)
	}
	enc.Close()
	d := c.NewCoder()
	defer d.Close()
	var dst decode.Image
	sh := &shard{name: "fuzz"} // Decode names the shard of a record it finds damaged
	f.Fuzz(func(t *testing.T, codec, w, h, y0, y1 uint8, payload []byte) {
		r := Ref{Path: "fuzz", Codec: Codecs[int(codec)%len(Codecs)], Width: uint32(w % 65), Height: uint32(h % 65), sh: sh}
		img, err := d.Decode(&dst, r, payload)
		if err == nil && (img.Width != int(r.Width) || img.Height != int(r.Height) || len(img.Pix) < 3*img.Width*img.Height || img.Stride < 3*img.Width) {
			t.Fatalf("%s record of %dx%d decodes to %dx%d, stride %d, %d bytes", r.Codec, r.Width, r.Height, img.Width, img.Height, img.Stride, len(img.Pix))
		}
		// Some of the rows: at least those asked for (none may be), whatever the payload says.
		lo, hi := int(y0)%(int(r.Height)+1), int(y1)%(int(r.Height)+1)
		lo, hi = min(lo, hi), max(lo, hi)
		img, top, err := d.DecodeRows(&dst, r, payload, lo, hi)
		if err != nil {
			return
		}
		if img.Width != int(r.Width) || lo < hi && (top > lo || top+img.Height < hi) || len(img.Pix) < 3*img.Width*img.Height || img.Stride < 3*img.Width {
			t.Fatalf("%s record of %dx%d: rows %d to %d decode to %dx%d from row %d, stride %d, %d bytes", r.Codec, r.Width, r.Height, lo, hi, img.Width, img.Height, top, img.Stride, len(img.Pix))
		}
	})
}

// FuzzReadInfo feeds arbitrary bytes to ReadInfo as a dataset.json and as the record of
// its first part. Whatever it accepts is within the format's bounds: parts a conversion
// can have, manifests whose shards can hold what they say, a Stopped no longer than the
// records it explains; and it writes back to a dataset.json that reads the same. The
// datasets it reads have at most 64 parts: more only take longer.
func FuzzReadInfo(f *testing.F) {
	whole := Info{Version: WholeInfoVersion, FormatVersion: FormatVersion, Spec: testSpec, Codec: S2, Samples: 3, Stored: 3, Complete: true, Classes: []string{"a", "b"},
		Shards: []ShardManifest{{Name: "x.shard", Codec: S2, Records: 3, Bytes: 30_000, HeaderCRC: 7, IndexBytes: 300, IndexCRC: 9}}}
	parted := Info{Version: InfoVersion, FormatVersion: FormatVersion, Spec: testSpec, Codec: S2, Samples: 3, Parts: 2}
	part := whole
	part.Version, part.Part = InfoVersion, "0/2"
	part.Shards = []ShardManifest{{Name: "part-0-of-2-x.shard", Codec: S2, Records: 1, Bytes: 10_000, IndexBytes: 100}}
	for _, seed := range [][2]any{{whole, whole}, {parted, part}, {parted, whole}} {
		a, _ := json.Marshal(seed[0])
		b, _ := json.Marshal(seed[1])
		f.Add(a, b)
	}
	f.Add([]byte(fmt.Sprintf(`{"format_version": %d, "spec": "s", "codec": "s2", "samples": 3, "stored": 3, "complete": true}`, FormatVersion)), []byte{})
	f.Add([]byte(fmt.Sprintf(`{"version": 3, "format_version": %d, "spec": "s", "codec": "s2", "parts": 2000000000}`, FormatVersion)), []byte{})
	f.Fuzz(func(t *testing.T, head, record []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, InfoName), head, 0o644); err != nil {
			t.Fatal(err)
		}
		h, err := parseInfo(InfoName, head)
		if err != nil {
			return
		}
		if h.Parts > 64 {
			return
		}
		if h.Parts > 0 {
			p := Part{Index: 0, Count: h.Parts}
			if err := os.WriteFile(filepath.Join(dir, p.PartInfoName()), record, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		info, err := ReadInfo(dir)
		if err != nil {
			return
		}
		if info.Parts < 0 || info.Parts > maxParts || len(info.Unfinished) > info.Parts {
			t.Fatalf("%d parts, %d unfinished", info.Parts, len(info.Unfinished))
		}
		for i := range info.Shards {
			if err := info.Shards[i].check(); err != nil {
				t.Fatalf("accepted shard %d: %v", i, err)
			}
		}
		if len(info.Stopped) > len(head)+len(record)+maxReasons*200+100 {
			t.Fatalf("Stopped of %d bytes from records of %d and %d", len(info.Stopped), len(head), len(record))
		}
		b, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if h2, err := parseInfo(InfoName, b); err != nil || h2.Parts != h.Parts || len(h2.Shards) != len(h.Shards) {
			t.Fatalf("written back, %s reads as %+v, %v", b, h2, err)
		}
	})
}
