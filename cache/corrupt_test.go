package cache

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
)

// fill stores n noisy w×w images under testKey(0..n-1) in dir, closes the cache and
// returns the Refs it ended with.
func fill(t *testing.T, dir string, o Options, n, w int) []Ref {
	t.Helper()
	c := open(t, dir, o)
	d := newCoder(t, c)
	refs := make([]Ref, n)
	for i := range n {
		put(t, d, testKey(i), i, testImage(uint64(i), w, w, true))
		refs[i], _ = c.Lookup(testKey(i))
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return refs
}

// checkAll loads every record but those in skip and compares its pixels.
func checkAll(t *testing.T, c *Cache, n, w int, skip ...int) {
	t.Helper()
	d := newCoder(t, c)
	for i := range n {
		if slices.Contains(skip, i) {
			continue
		}
		got, _ := mustLoad(t, c, d, testKey(i))
		if diff := samePixels(got, testImage(uint64(i), w, w, true)); diff != "" {
			t.Errorf("record %d: %s", i, diff)
		}
	}
}

// TestCorruptPayload flips one bit of a stored payload: the record still looks up, its
// Load fails with ErrCorrupt and forgets it, and a new Put of the key repairs it.
func TestCorruptPayload(t *testing.T) {
	for _, codec := range []Codec{Raw, S2, Zstd, JPEG} {
		t.Run(string(codec), func(t *testing.T) {
			dir := t.TempDir()
			const n, w, bad = 6, 24, 3
			refs := fill(t, dir, Options{Codec: codec}, n, w)
			flipByte(t, filepath.Join(dir, refs[bad].Shard()), refs[bad].off+int64(refs[bad].Bytes)-2)

			c := open(t, dir, Options{Codec: codec})
			d := newCoder(t, c)
			r, ok := c.Lookup(testKey(bad))
			if !ok {
				t.Fatal("damaged record not indexed")
			}
			if _, err := d.Load(new(decode.Image), r); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), testKey(bad).Path) {
				t.Fatalf("Load of a damaged record: %v, want ErrCorrupt naming %s", err, testKey(bad).Path)
			}
			if s := c.Stats(); s.Corrupt != 1 || s.Records != n-1 {
				t.Errorf("Stats %+v: want 1 corrupt, %d records", s, n-1)
			}
			if _, ok := c.Lookup(testKey(bad)); ok {
				t.Error("damaged record still indexed after its Load failed")
			}
			if slices.ContainsFunc(c.Records(testSpec), func(r Ref) bool { return r.Path == testKey(bad).Path }) {
				t.Error("Records lists the damaged record")
			}
			if codec.Lossless() {
				checkAll(t, c, n, w, bad)
			}
			put(t, d, testKey(bad), bad, testImage(bad, w, w, true))
			r2, ok := c.Lookup(testKey(bad))
			if !ok {
				t.Fatal("repaired record misses")
			}
			if _, err := d.Load(new(decode.Image), r2); err != nil {
				t.Fatalf("repaired record: %v", err)
			}
			c.Close()

			// A later Open indexes both copies; the repaired one, stored last, wins.
			c = open(t, dir, Options{ReadOnly: true})
			if codec.Lossless() {
				checkAll(t, c, n, w)
			} else if _, err := newCoder(t, c).Load(new(decode.Image), mustRef(t, c, testKey(bad))); err != nil {
				t.Errorf("repaired record after reopening: %v", err)
			}
			var problems []Problem
			rep, err := c.Verify(func(p Problem) { problems = append(problems, p) })
			if err != nil {
				t.Fatal(err)
			}
			// Verify reads every record of every shard, the damaged copy included.
			if rep.Damaged != 1 || len(problems) != 1 || problems[0].Path != testKey(bad).Path || problems[0].Offset != refs[bad].off ||
				problems[0].Shard != filepath.Join(dir, refs[bad].Shard()) || !errors.Is(problems[0].Err, ErrCorrupt) {
				t.Errorf("Verify: %+v, problems %+v; want the damaged copy of record %d at %s+%d", rep, problems, bad, refs[bad].Shard(), refs[bad].off)
			}
			if rep.Records != n+1 || rep.Shards != 2 || rep.Unreadable != 0 || rep.TornShards != 0 {
				t.Errorf("Verify: %+v, want %d records in 2 shards, no torn tails", rep, n+1)
			}
		})
	}
}

func mustRef(t testing.TB, c *Cache, k Key) Ref {
	t.Helper()
	r, ok := c.Lookup(k)
	if !ok {
		t.Fatalf("%s: miss", k.Path)
	}
	return r
}

// TestCorruptHeader damages a record header in the shard, whose copy in the index is
// intact: the record is found by the index but fails to read.
func TestCorruptHeader(t *testing.T) {
	dir := t.TempDir()
	const n, w, bad = 5, 16, 2
	refs := fill(t, dir, Options{}, n, w)
	flipByte(t, filepath.Join(dir, refs[bad].Shard()), refs[bad].off+24) // the label

	c := open(t, dir, Options{})
	var problems []Problem
	rep, err := c.Verify(func(p Problem) { problems = append(problems, p) })
	if err != nil {
		t.Fatal(err)
	}
	if rep.Damaged != 1 || rep.Records != n || len(problems) != 1 || problems[0].Path != testKey(bad).Path || !errors.Is(problems[0].Err, ErrCorrupt) {
		t.Errorf("Verify: %+v, %+v; want record %d damaged", rep, problems, bad)
	}
	if _, ok := c.Lookup(testKey(bad)); ok {
		t.Error("Verify left the damaged record indexed")
	}
	if s := c.Stats(); s.Corrupt != 1 {
		t.Errorf("Stats counts %d corrupt, want 1", s.Corrupt)
	}
	checkAll(t, c, n, w, bad)
}

// TestLostIndex damages, cuts or deletes a shard's index: every record is still found,
// by scanning the shard past the last good entry.
func TestLostIndex(t *testing.T) {
	const n, w = 8, 20
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, idx string, size int64)
	}{
		{"deleted", func(t *testing.T, idx string, _ int64) {
			if err := os.Remove(idx); err != nil {
				t.Fatal(err)
			}
		}},
		{"empty", func(t *testing.T, idx string, _ int64) { truncate(t, idx, 0) }},
		{"cut mid-entry", func(t *testing.T, idx string, size int64) { truncate(t, idx, size/2+5) }},
		{"cut by one byte", func(t *testing.T, idx string, size int64) { truncate(t, idx, size-1) }},
		{"offset flipped", func(t *testing.T, idx string, _ int64) { flipByte(t, idx, 2) }},
		{"header copy flipped", func(t *testing.T, idx string, size int64) { flipByte(t, idx, size/2) }},
		{"garbage appended", func(t *testing.T, idx string, size int64) {
			f, err := os.OpenFile(idx, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write([]byte(strings.Repeat("\xff", 100)))
			f.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fill(t, dir, Options{}, n, w)
			idx := files(t, dir, indexExt)
			if len(idx) != 1 {
				t.Fatalf("%d indexes, want 1", len(idx))
			}
			fi, err := os.Stat(idx[0])
			if err != nil {
				t.Fatal(err)
			}
			tc.damage(t, idx[0], fi.Size())
			c := open(t, dir, Options{})
			if s := c.Stats(); s.Records != n || s.Bytes != diskBytes(t, dir) {
				t.Errorf("Stats %+v: want %d records, %d bytes", s, n, diskBytes(t, dir))
			}
			checkAll(t, c, n, w)
			rep, err := c.Verify(func(p Problem) { t.Errorf("Verify: %+v", p) })
			if err != nil || rep.Records != n || rep.Unreadable != 0 {
				t.Errorf("Verify: %+v, %v", rep, err)
			}
			// The writer of a new shard is unaffected.
			put(t, newCoder(t, c), testKey(n), n, testImage(n, w, w, true))
		})
	}
}

// TestTornShard cuts a shard inside its last record, as a writer killed mid-write
// leaves it, and damages a shard header.
func TestTornShard(t *testing.T) {
	const n, w = 6, 20
	dir := t.TempDir()
	refs := fill(t, dir, Options{}, n, w)
	last := refs[n-1]
	truncate(t, filepath.Join(dir, last.Shard()), last.off+int64(last.Bytes)-7)

	c := open(t, dir, Options{})
	if _, ok := c.Lookup(testKey(n - 1)); ok {
		t.Error("the torn record is indexed")
	}
	checkAll(t, c, n-1, w)
	rep, err := c.Verify(func(p Problem) { t.Errorf("Verify: %+v", p) })
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != n-1 || rep.Damaged != 0 || rep.TornShards != 1 || rep.Unreadable != int64(last.Bytes-7) {
		t.Errorf("Verify: %+v, want %d records, one torn shard of %d bytes", rep, n-1, last.Bytes-7)
	}
	c.Close()

	// A damaged shard header makes the shard unreadable, not the cache.
	flipByte(t, filepath.Join(dir, last.Shard()), 20)
	var logs int
	c = open(t, dir, Options{Logf: logTo(t, &logs)})
	if s := c.Stats(); s.Records != 0 || s.Shards != 0 || logs != 1 {
		t.Errorf("with a damaged shard header: Stats %+v, %d log lines; want no records and one line", s, logs)
	}
	put(t, newCoder(t, c), testKey(0), 0, testImage(0, w, w, true))
}

func truncate(t *testing.T, file string, size int64) {
	t.Helper()
	if err := os.Truncate(file, size); err != nil {
		t.Fatal(err)
	}
}

// A mapped record's payload is summed by the first read of a ReadOnly cache only: a byte
// changed under the mapping afterwards goes unseen by that cache's reads, but not by
// VerifyDataset, nor by the next Open.
func TestReadSumsOncePerOpen(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, Options{Codec: Raw})
	d := newCoder(t, c)
	put(t, d, testKey(1), 0, testImage(1, 64, 48, true))
	put(t, d, testKey(2), 0, testImage(2, 64, 48, true))
	c.Close()

	ro := open(t, dir, Options{ReadOnly: true})
	r, ok := ro.Lookup(testKey(1))
	if !ok || ro.Copies(r) {
		t.Fatalf("record 1: found %v, copied %v: want it found in the mapping", ok, ro.Copies(r))
	}
	if _, err := ro.Read(r, nil); err != nil {
		t.Fatal(err)
	}
	r2, _ := ro.Lookup(testKey(2))
	flipByte(t, filepath.Join(dir, r.Shard()), r.Offset()+int64(r.Bytes)-1)    // record 1's last payload byte
	flipByte(t, filepath.Join(dir, r2.Shard()), r2.Offset()+int64(r2.Bytes)-1) // record 2, never read
	if _, err := ro.Read(r, nil); err != nil {
		t.Errorf("record 1 again: %v; want no second sum in the same Open", err)
	}
	if _, err := ro.Read(r2, nil); !errors.Is(err, ErrCorrupt) {
		t.Errorf("record 2, read first after the change: %v, want ErrCorrupt", err)
	}
	var damaged []string
	if _, err := ro.VerifyDataset(nil, func(p Problem) { damaged = append(damaged, p.Path) }); err != nil {
		t.Fatal(err)
	}
	if len(damaged) != 2 {
		t.Errorf("VerifyDataset found %v damaged; want both records", damaged)
	}
	ro.Close()
	again := open(t, dir, Options{ReadOnly: true})
	if r, ok := again.Lookup(testKey(1)); !ok {
		t.Fatal("record 1 gone")
	} else if _, err := again.Read(r, nil); !errors.Is(err, ErrCorrupt) {
		t.Errorf("record 1 in a new Open: %v, want ErrCorrupt", err)
	}
}
