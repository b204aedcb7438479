package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/decode"
)

// TestKeyIDGolden pins the digest: a change to Key.ID, intended or not, would orphan
// every record already stored, so it must come with a FormatVersion change (these are
// version 2's).
func TestKeyIDGolden(t *testing.T) {
	for _, tc := range []struct {
		k    Key
		want string
	}{
		{Key{Spec: "max_pixels=178956970 orientation=exif resize=shorter(256) backend=go", Path: "n01440764/a.JPEG",
			Size: 110592, ModTime: 1700000000123456789, Hash: []byte{1, 2, 3}}, "b6250901945ff0ff9fea2e86bb2bb81d"},
		{Key{}, "a64a5192c388e011c710dc47d18c8e6a"},
	} {
		if got := tc.k.ID().String(); got != tc.want {
			t.Errorf("%+v: ID %s, want %s", tc.k, got, tc.want)
		}
	}
}

// TestKeyIDReference compares ID with the digest computed field by field, for keys
// short and long (longer than ID's stack buffer).
func TestKeyIDReference(t *testing.T) {
	ref := func(k Key) ID {
		h := sha256.New()
		u64 := func(v uint64) { h.Write(binary.LittleEndian.AppendUint64(nil, v)) }
		u64(FormatVersion)
		u64(uint64(len(k.Spec)))
		h.Write([]byte(k.Spec))
		u64(uint64(len(k.Path)))
		h.Write([]byte(k.Path))
		u64(uint64(k.Size))
		u64(uint64(k.ModTime))
		u64(uint64(len(k.Hash)))
		h.Write(k.Hash)
		return ID(h.Sum(nil)[:16])
	}
	for _, k := range []Key{
		{},
		testKey(1),
		{Spec: strings.Repeat("s", 300), Path: strings.Repeat("p", 300), Size: -1, ModTime: -2, Hash: make([]byte, 32)},
		{Spec: "x", Path: strings.Repeat("/", maxPath), Hash: []byte{0}},
	} {
		if got, want := k.ID(), ref(k); got != want {
			t.Errorf("ID of a key with %d+%d+%d bytes = %s, want %s", len(k.Spec), len(k.Path), len(k.Hash), got, want)
		}
	}
}

// TestKeyMisses changes one field of a stored key at a time: each change must miss.
func TestKeyMisses(t *testing.T) {
	base := Key{Spec: testSpec, Path: "a/b.jpg", Size: 1234, ModTime: 1_700_000_000_000_000_001, Hash: []byte{1, 2, 3, 4}}
	c := open(t, t.TempDir(), Options{})
	d := newCoder(t, c)
	put(t, d, base, 1, testImage(1, 4, 4, true))
	if _, ok := c.Lookup(base); !ok {
		t.Fatal("stored key misses")
	}
	same := base
	same.Hash = append([]byte(nil), base.Hash...)
	if _, ok := c.Lookup(same); !ok {
		t.Error("an equal key in new memory misses")
	}
	for name, change := range map[string]func(*Key){
		"spec":           func(k *Key) { k.Spec += " " },
		"path":           func(k *Key) { k.Path = "a/B.jpg" },
		"size":           func(k *Key) { k.Size++ },
		"mtime":          func(k *Key) { k.ModTime++ },
		"hash":           func(k *Key) { k.Hash = []byte{1, 2, 3, 5} },
		"no hash":        func(k *Key) { k.Hash = nil },
		"spec into path": func(k *Key) { k.Spec, k.Path = k.Spec+"a", k.Path[1:] },
		"path into spec": func(k *Key) { k.Spec, k.Path = k.Spec[:len(k.Spec)-1], k.Spec[len(k.Spec)-1:]+k.Path },
		"path into hash": func(k *Key) {
			k.Path, k.Hash = k.Path[:len(k.Path)-1], append([]byte{k.Path[len(k.Path)-1]}, k.Hash...)
		},
	} {
		k := base
		change(&k)
		if _, ok := c.Lookup(k); ok {
			t.Errorf("changing the %s still hits", name)
		}
		if k.ID() == base.ID() {
			t.Errorf("changing the %s keeps the ID", name)
		}
	}
	if s := c.Stats(); s.Hits != 2 || s.Misses != 9 {
		t.Errorf("Stats counts %d hits and %d misses, want 2 and 9", s.Hits, s.Misses)
	}
}

// TestKeyFromFile keys a record by a real file's Stat: rewriting the file, or only
// touching it, must miss instead of serving the old pixels.
func TestKeyFromFile(t *testing.T) {
	src := t.TempDir()
	file := filepath.Join(src, "img.jpg")
	keyOf := func() Key {
		t.Helper()
		fi, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		return Key{Spec: testSpec, Path: "img.jpg", Size: fi.Size(), ModTime: fi.ModTime().UnixNano()}
	}
	c := open(t, t.TempDir(), Options{})
	d := newCoder(t, c)
	mtime := time.Date(2024, 1, 2, 3, 4, 5, 6000, time.UTC)
	write := func(content string, mt time.Time) {
		t.Helper()
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(file, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	write("first version", mtime)
	k1 := keyOf()
	old := testImage(1, 6, 6, true)
	put(t, d, k1, 1, old)

	for _, tc := range []struct {
		name    string
		content string
		mtime   time.Time
	}{
		{"same size, new mtime", "first VERSION", mtime.Add(time.Second)},
		{"new size, same mtime", "second, longer version", mtime},
		{"same content, mtime 1µs later", "first version", mtime.Add(time.Microsecond)},
	} {
		write(tc.content, tc.mtime)
		k := keyOf()
		if r, ok := c.Lookup(k); ok {
			got, _ := d.Load(new(decode.Image), r)
			t.Errorf("%s: key %+v hits the record of %+v (pixels equal to the old ones: %t)", tc.name, k, k1, got != nil && samePixels(got, old) == "")
		}
	}
	write("first version", mtime)
	if _, ok := c.Lookup(keyOf()); !ok {
		t.Error("restoring the file's content and mtime misses")
	}
}
