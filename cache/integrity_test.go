package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
)

// dataset stores n noisy w×w images under testKey(0..n-1) in dir, in shards of at most
// shardBytes, and returns the Info of a finished conversion with its manifest.
func dataset(t *testing.T, dir string, n, w int, shardBytes int64) *Info {
	t.Helper()
	c := open(t, dir, Options{ShardBytes: shardBytes})
	d := newCoder(t, c)
	for i := range n {
		put(t, d, testKey(i), i, testImage(uint64(i), w, w, true))
	}
	m, err := c.Manifest(testSpec)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return &Info{Version: InfoVersion, FormatVersion: FormatVersion, Spec: testSpec, Codec: S2, Samples: n, Stored: n, Complete: true, Shards: m}
}

// shardOf returns the records of each shard of dir's testSpec records, by shard file.
func shardsOf(t *testing.T, dir string) (names []string, refs map[string][]Ref) {
	t.Helper()
	c := open(t, dir, Options{ReadOnly: true})
	refs = map[string][]Ref{}
	for _, r := range c.Records(testSpec) {
		refs[r.Shard()] = append(refs[r.Shard()], r)
	}
	for name := range refs {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, refs
}

// TestManifest checks that a manifest lists every shard of the spec with its record
// count, size and checksums, and that an untouched directory matches it.
func TestManifest(t *testing.T) {
	dir := t.TempDir()
	const n, w = 15, 64 // 12 KiB records, five to a 64 KiB shard
	info := dataset(t, dir, n, w, 64<<10)
	names, refs := shardsOf(t, dir)
	if len(info.Shards) != len(names) || len(names) < 3 {
		t.Fatalf("manifest of %d shards, directory has %d (want at least 3)", len(info.Shards), len(names))
	}
	total := 0
	for i, m := range info.Shards {
		fi, err := os.Stat(filepath.Join(dir, m.Name))
		if err != nil {
			t.Fatal(err)
		}
		if m.Name != names[i] || m.Records != len(refs[m.Name]) || m.Bytes != fi.Size() || m.IndexBytes == 0 || m.Codec != S2 {
			t.Errorf("manifest entry %+v; shard %s has %d records, %d bytes", m, names[i], len(refs[names[i]]), fi.Size())
		}
		total += m.Records
	}
	if total != n {
		t.Errorf("manifest counts %d records, want %d", total, n)
	}
	c := open(t, dir, Options{ReadOnly: true})
	if ps := c.CheckDataset(info); len(ps) != 0 {
		t.Errorf("CheckDataset of an untouched dataset: %+v", ps)
	}
	rep, err := c.VerifyDataset(info, func(p Problem) { t.Errorf("VerifyDataset: %+v", p) })
	if err != nil || !rep.OK() || rep.Records != n || rep.Shards != len(names) {
		t.Errorf("VerifyDataset: %+v, %v", rep, err)
	}
}

// TestDatasetDamage damages a converted dataset in each way a file can be damaged or
// lost, and checks that CheckDataset (opening), VerifyDataset with the manifest and
// VerifyDataset without it (a loader's cache) each report it, under its kind, and that
// a reader still lists every sample whose index survives, reading it failing with an
// error naming the shard.
func TestDatasetDamage(t *testing.T) {
	const n, w = 15, 64
	type damage struct {
		name string
		kind Kind // what the manifest check reports
		// structural is what a check without manifest reports; "" for nothing.
		structural Kind
		// listed is how many samples a reader still lists, unreadable counts how many
		// of those fail to read; -1: those of the damaged shard.
		listed, unreadable int
		do                 func(t *testing.T, shard, idx string, refs []Ref)
	}
	mid := func(refs []Ref) Ref { return refs[len(refs)/2] }
	for _, tc := range []damage{
		{"record payload", KindRecord, KindRecord, n, 1, func(t *testing.T, shard, _ string, refs []Ref) {
			flipByte(t, shard, mid(refs).off+int64(mid(refs).Bytes)-3)
		}},
		{"shard header", KindHeader, KindHeader, n, -1, func(t *testing.T, shard, _ string, _ []Ref) {
			flipByte(t, shard, 21) // the codec field
		}},
		{"index entry", KindIndex, KindIndex, n, 0, func(t *testing.T, _, idx string, _ []Ref) {
			flipByte(t, idx, 2) // the first entry's offset
		}},
		{"index deleted", KindIndex, KindIndex, n, 0, func(t *testing.T, _, idx string, _ []Ref) {
			if err := os.Remove(idx); err != nil {
				t.Fatal(err)
			}
		}},
		{"shard deleted", KindMissing, KindMissing, n, -1, func(t *testing.T, shard, _ string, _ []Ref) {
			if err := os.Remove(shard); err != nil {
				t.Fatal(err)
			}
		}},
		{"shard and index deleted", KindMissing, "", n - 5, 0, func(t *testing.T, shard, idx string, _ []Ref) {
			for _, f := range []string{shard, idx} {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"shard truncated", KindTruncated, KindTruncated, n, 3, func(t *testing.T, shard, _ string, refs []Ref) {
			truncate(t, shard, refs[2].off+100) // records 2, 3 and 4 of 5
		}},
		{"shard emptied", KindTruncated, KindTruncated, n, -1, func(t *testing.T, shard, _ string, _ []Ref) {
			truncate(t, shard, 0)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			info := dataset(t, dir, n, w, 64<<10)
			names, refs := shardsOf(t, dir)
			victim := names[1]
			if len(refs[victim]) != 5 {
				t.Fatalf("shard %s holds %d records, want 5", victim, len(refs[victim]))
			}
			shard := filepath.Join(dir, victim)
			tc.do(t, shard, strings.TrimSuffix(shard, shardExt)+indexExt, refs[victim])
			unreadable := tc.unreadable
			if unreadable < 0 {
				unreadable = len(refs[victim])
			}

			// Opening: the cheap check finds it (all but a record's damage).
			c := open(t, dir, Options{ReadOnly: true})
			ps := c.CheckDataset(info)
			if tc.kind == KindRecord {
				if len(ps) != 0 {
					t.Errorf("CheckDataset reports %+v for a damaged record, which it does not read", ps)
				}
			} else if len(ps) == 0 || ps[0].Kind != tc.kind || ps[0].Shard != shard {
				t.Errorf("CheckDataset: %+v, want %s of %s first", ps, tc.kind, shard)
			}
			got := c.Records(testSpec)
			if len(got) != tc.listed {
				t.Errorf("%d samples listed, want %d", len(got), tc.listed)
			}
			d := newCoder(t, c)
			bad := 0
			for _, r := range got {
				if _, err := d.Load(new(decode.Image), r); err != nil {
					bad++
					if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), victim) {
						t.Errorf("reading %s: %v; want ErrCorrupt naming %s", r.Path, err, victim)
					}
				}
			}
			if bad != unreadable {
				t.Errorf("%d samples fail to read, want %d", bad, unreadable)
			}

			// verify, with the manifest and without.
			for _, withInfo := range []bool{true, false} {
				want, in := tc.kind, info
				if !withInfo {
					want, in = tc.structural, nil
				}
				c := open(t, dir, Options{ReadOnly: true})
				var problems []Problem
				rep, err := c.VerifyDataset(in, func(p Problem) { problems = append(problems, p) })
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("manifest %t: %+v", withInfo, rep)
				for _, p := range problems {
					t.Logf("  %s %s+%d %s: %v", p.Kind, filepath.Base(p.Shard), p.Offset, p.Path, p.Err)
				}
				if want == "" {
					if !rep.OK() {
						t.Errorf("manifest %t: %+v, want no damage seen", withInfo, rep)
					}
					continue
				}
				if rep.OK() || len(problems) == 0 || problems[0].Kind != want || problems[0].Shard != shard {
					t.Errorf("manifest %t: %+v, problems %+v; want %s of %s first", withInfo, rep, problems, want, shard)
				}
				if want != KindRecord && want != KindIndex && rep.Lost != unreadable && tc.name != "shard and index deleted" {
					t.Errorf("manifest %t: %d records lost, want %d", withInfo, rep.Lost, unreadable)
				}
				if rep.Damaged != min(1, tc.unreadable) && want == KindRecord {
					t.Errorf("manifest %t: %d damaged records, want 1", withInfo, rep.Damaged)
				}
			}
		})
	}
}

// TestDatasetChanged: bytes appended to a shard that hold no whole record are a torn
// tail, as for any shard; a record appended is a change from the manifest.
func TestDatasetChanged(t *testing.T) {
	dir := t.TempDir()
	info := dataset(t, dir, 10, 64, 64<<10)
	names, refs := shardsOf(t, dir)
	shard := filepath.Join(dir, names[0])
	appendTo := func(b []byte) {
		f, err := os.OpenFile(shard, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	appendTo(make([]byte, 10))
	c := open(t, dir, Options{ReadOnly: true})
	if ps := c.CheckDataset(info); len(ps) != 0 {
		t.Errorf("CheckDataset with a torn tail: %+v", ps)
	}
	if rep, err := c.VerifyDataset(info, nil); err != nil || !rep.OK() || rep.TornShards != 1 || rep.Unreadable != 10 {
		t.Errorf("VerifyDataset with a torn tail: %+v, %v", rep, err)
	}

	truncate(t, shard, info.Shards[0].Bytes)
	r := refs[names[1]][0]
	rec := make([]byte, r.Bytes)
	f, err := os.Open(filepath.Join(dir, names[1]))
	if err != nil {
		t.Fatal(err)
	}
	f.ReadAt(rec, r.off)
	f.Close()
	appendTo(rec)
	c = open(t, dir, Options{ReadOnly: true})
	if ps := c.CheckDataset(info); len(ps) != 1 || ps[0].Kind != KindChanged || ps[0].Shard != shard {
		t.Errorf("CheckDataset with a record appended: %+v, want one changed shard", ps)
	}
}

// TestSupersededRecord: a damaged record that a later run stored again is reported, as
// superseded, and does not fail the check.
func TestSupersededRecord(t *testing.T) {
	dir := t.TempDir()
	const n, w, bad = 6, 24, 2
	refs := fill(t, dir, Options{}, n, w)
	flipByte(t, filepath.Join(dir, refs[bad].Shard()), refs[bad].off+int64(refs[bad].Bytes)-2)
	c := open(t, dir, Options{})
	d := newCoder(t, c)
	if _, err := d.Load(new(decode.Image), mustRef(t, c, testKey(bad))); err == nil {
		t.Fatal("damaged record loads")
	}
	put(t, d, testKey(bad), bad, testImage(bad, w, w, true))
	m, err := c.Manifest(testSpec)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	info := &Info{Version: InfoVersion, FormatVersion: FormatVersion, Spec: testSpec, Codec: S2, Stored: n, Complete: true, Shards: m}
	ro := open(t, dir, Options{ReadOnly: true})
	var problems []Problem
	rep, err := ro.VerifyDataset(info, func(p Problem) { problems = append(problems, p) })
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Damaged != 1 || rep.Superseded != 1 || len(problems) != 1 || !problems[0].Superseded || problems[0].Path != testKey(bad).Path {
		t.Errorf("VerifyDataset: %+v, %+v; want record %d damaged and superseded", rep, problems, bad)
	}
	// Without the dataset's Info nothing says which copy is used: it is damage.
	rep, err = open(t, dir, Options{ReadOnly: true}).VerifyDataset(nil, nil)
	if err != nil || rep.OK() || rep.Superseded != 0 {
		t.Errorf("VerifyDataset without Info: %+v, %v", rep, err)
	}
}

// TestLockConversion: a second conversion lock on a directory fails at once, saying who
// holds it, until the first is released.
func TestLockConversion(t *testing.T) {
	dir := t.TempDir()
	a, b := open(t, dir, Options{}), open(t, dir, Options{})
	if _, running := Converting(dir); running {
		t.Fatal("Converting before any lock")
	}
	release, err := a.LockConversion()
	if err != nil {
		t.Fatal(err)
	}
	holder, running := Converting(dir)
	if !running || !strings.Contains(holder, fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("Converting: %q, %t", holder, running)
	}
	if _, err := b.LockConversion(); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid ") {
		t.Errorf("second lock: %v, want ErrLocked naming the holder", err)
	}
	release()
	if _, running := Converting(dir); running {
		t.Error("Converting after release")
	}
	release, err = b.LockConversion()
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	release()
	if _, err := open(t, dir, Options{ReadOnly: true}).LockConversion(); !errors.Is(err, ErrReadOnly) {
		t.Errorf("lock of a read-only cache: %v", err)
	}
}

// TestInfoVersions: a version 1 dataset.json (no version, no manifest) reads, without a
// manifest; one from a newer conveyor is refused.
func TestInfoVersions(t *testing.T) {
	dir := t.TempDir()
	v1 := fmt.Sprintf(`{"format_version": %d, "spec": %q, "codec": "s2", "samples": 3, "stored": 3, "complete": true}`, FormatVersion, testSpec)
	if err := os.WriteFile(filepath.Join(dir, InfoName), []byte(v1), 0o644); err != nil {
		t.Fatal(err)
	}
	info, err := ReadInfo(dir)
	if err != nil || info.Version != 0 || info.Manifested() {
		t.Errorf("version 1: %+v, %v", info, err)
	}
	if err := WriteInfo(dir, &Info{Version: InfoVersion + 1, FormatVersion: FormatVersion, Spec: testSpec}); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadInfo(dir); err == nil || !strings.Contains(err.Error(), "newer conveyor") {
		t.Errorf("newer version: %v", err)
	}
}

// TestOldFormatRefused: a dataset and a shard of format version 1 (s2 records whole, not
// in bands) are refused, saying they come from an older conveyor and must be converted
// again, not read as version 2.
func TestOldFormatRefused(t *testing.T) {
	dir := t.TempDir()
	if err := WriteInfo(dir, &Info{Version: InfoVersion, FormatVersion: 1, Spec: testSpec}); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadInfo(dir); err == nil || !strings.Contains(err.Error(), "format version 1, written by an older conveyor") || !strings.Contains(err.Error(), "convert the dataset again") {
		t.Errorf("dataset of format 1: %v", err)
	}
	hdr := encodeShardHeader(S2, testSpec)
	binary.LittleEndian.PutUint32(hdr[16:], 1)
	if _, _, _, _, err := parseShardHeader(hdr); err == nil || !strings.Contains(err.Error(), "shard format version 1, written by an older conveyor") {
		t.Errorf("shard of format 1: %v", err)
	}
}
