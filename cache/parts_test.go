package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestParsePart(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Part
		err  string
	}{
		{"0/1", Part{0, 1}, ""},
		{"3/8", Part{3, 8}, ""},
		{"7/8", Part{7, 8}, ""},
		{"8/8", Part{}, "part 8/8"},
		{"3/3", Part{}, "part 3/3"},
		{"-1/4", Part{}, "part -1/4"},
		{"0/0", Part{}, "part 0/0"},
		{"x", Part{}, `part "x": want INDEX/COUNT`},
		{"1/", Part{}, "want INDEX/COUNT"},
		{"1/2/3", Part{}, "want INDEX/COUNT"},
		{"", Part{}, "want INDEX/COUNT"},
	} {
		got, err := ParsePart(tc.in)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("ParsePart(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParsePart(%q) error %v, want one containing %q", tc.in, err, tc.err)
		}
	}
}

// The parts of n samples are contiguous, disjoint and cover them, in order, and differ
// in size by one at most.
func TestPartRangesCover(t *testing.T) {
	for _, n := range []int{1, 2, 7, 100, 1281167} {
		for _, count := range []int{1, 2, 3, 7, 8, 64} {
			if count > n {
				continue
			}
			next, small, big := 0, n, 0
			for i := range count {
				lo, hi := Part{i, count}.Range(n)
				if lo != next || hi < lo {
					t.Fatalf("n %d, part %d/%d: [%d, %d), want it to start at %d", n, i, count, lo, hi, next)
				}
				next = hi
				small, big = min(small, hi-lo), max(big, hi-lo)
			}
			if next != n || big-small > 1 {
				t.Fatalf("n %d in %d parts: cover [0, %d), sizes %d to %d", n, count, next, small, big)
			}
		}
	}
	var names []string
	for i := range 16 {
		names = append(names, Part{i, 16}.ShardPrefix())
	}
	if !slices.IsSorted(names) || names[2] != "part-02-of-16-" {
		t.Fatalf("shard prefixes of 16 parts do not sort in part order: %q", names)
	}
	for _, tc := range []struct {
		name string
		want Part
		ok   bool
	}{
		{"/d/part-02-of-16-18eac6-b2d31ebf.shard", Part{2, 16}, true},
		{"part-0-of-1-x.idx", Part{0, 1}, true},
		{"part-2-of-16-x.shard", Part{}, false}, // not padded: not a name a part writes
		{"part-3-of-3-x.shard", Part{}, false},
		{"18eac6-b2d31ebf.shard", Part{}, false},
	} {
		if got, ok := ShardPart(tc.name); got != tc.want || ok != tc.ok {
			t.Errorf("ShardPart(%q) = %v, %t; want %v, %t", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	if lo, hi := (Part{}).Range(5); lo != 0 || hi != 5 {
		t.Fatalf("the zero Part holds [%d, %d) of 5", lo, hi)
	}
}

// Parts racing to create dataset.json: one wins, the others agree with it, and a part
// of another conversion is refused naming the difference.
func TestCreatePartedInfo(t *testing.T) {
	dir := t.TempDir()
	info := &Info{FormatVersion: FormatVersion, Spec: testSpec, Codec: S2, Samples: 10, Classes: []string{"a", "b"}, Parts: 4}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = CreatePartedInfo(dir, info) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
	}
	other := *info
	other.Parts = 5
	if err := CreatePartedInfo(dir, &other); err == nil || !strings.Contains(err.Error(), "in 4 parts, not 5") {
		t.Fatalf("another count: %v", err)
	}
	other = *info
	other.Codec = Zstd
	if err := CreatePartedInfo(dir, &other); err == nil || !strings.Contains(err.Error(), "codec") {
		t.Fatalf("another codec: %v", err)
	}
	// As many files in the same classes, but not the same files.
	ldir := t.TempDir()
	listed := *info
	listed.Listing = ListingHash(10, func(i int) string { return fmt.Sprintf("a/%02d.jpg", i) })
	if err := CreatePartedInfo(ldir, &listed); err != nil {
		t.Fatal(err)
	}
	other = listed
	other.Listing = ListingHash(10, func(i int) string { return fmt.Sprintf("a/%02d.png", i) })
	if err := CreatePartedInfo(ldir, &other); err == nil || !strings.Contains(err.Error(), "listed other files") {
		t.Fatalf("another listing: %v", err)
	}
	if err := CreatePartedInfo(ldir, &listed); err != nil {
		t.Fatalf("the same listing: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("left %d files, want dataset.json alone", len(ents))
	}

	got, err := ReadInfo(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Complete || len(got.Unfinished) != 4 || !strings.Contains(got.Stopped, "part 3/4 has not run") {
		t.Fatalf("no part done: complete %t, unfinished %v, stopped %q", got.Complete, got.Unfinished, got.Stopped)
	}
	for i := range 4 {
		p := Part{i, 4}
		pi := &Info{FormatVersion: FormatVersion, Spec: testSpec, Codec: S2, Samples: 2, Stored: 2, Complete: i != 2,
			Shards: []ShardManifest{{Name: p.ShardPrefix() + "x.shard"}}}
		if i == 2 {
			pi.Stopped = "stopped with 1 of 2 files stored: cache: full"
		}
		if err := WritePartInfo(dir, p, pi); err != nil {
			t.Fatal(err)
		}
	}
	got, err = ReadInfo(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Complete || got.Stored != 8 || len(got.Shards) != 4 || len(got.Unfinished) != 1 || got.Unfinished[0] != "2/4" ||
		!strings.Contains(got.Stopped, "part 2/4 stopped with 1 of 2 files stored") {
		t.Fatalf("part 2/4 stopped: complete %t, stored %d, %d shards, unfinished %v, stopped %q", got.Complete, got.Stored, len(got.Shards), got.Unfinished, got.Stopped)
	}
	if err := WriteInfo(dir, got); err == nil {
		t.Fatal("WriteInfo rewrote the dataset.json of a dataset converted in parts")
	}
	os.Remove(filepath.Join(dir, Part{1, 4}.PartInfoName()))
	if got, err := ReadInfo(dir); err != nil || len(got.Unfinished) != 2 || got.Unfinished[0] != "1/4" {
		t.Fatalf("part 1/4's file removed: unfinished %v, %v", got.Unfinished, err)
	}
	// A part file of another part is refused.
	b, _ := os.ReadFile(filepath.Join(dir, Part{0, 4}.PartInfoName()))
	os.WriteFile(filepath.Join(dir, Part{1, 4}.PartInfoName()), b, 0o644)
	if _, err := ReadInfo(dir); err == nil || !strings.Contains(err.Error(), `part "0/4"`) {
		t.Fatalf("part 0/4's file as part 1/4's: %v", err)
	}
	if _, err := ReadInfo(t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no dataset.json: %v", err)
	}
}

// A part's conversion lock is its own: parts lock at once, a part twice does not, and
// Converting names the running part.
func TestLockPart(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, Options{})
	r0, err := c.LockPart(Part{0, 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r0()
	r1, err := c.LockPart(Part{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	r1()
	if _, err := c.LockPart(Part{0, 2}); !errors.Is(err, ErrLocked) {
		t.Fatalf("part 0/2 locked twice: %v", err)
	}
	if holder, running := Converting(dir); !running || !strings.HasPrefix(holder, "part 0/2: pid ") {
		t.Fatalf("Converting = %q, %t; want part 0/2 running", holder, running)
	}
	if err := CreatePartedInfo(dir, &Info{FormatVersion: FormatVersion, Spec: testSpec, Codec: S2, Samples: 4, Parts: 2}); err != nil {
		t.Fatal(err)
	}
	info, err := ReadInfo(dir)
	if err != nil || !strings.Contains(info.Stopped, "part 0/2 is still running (pid ") || !strings.Contains(info.Stopped, "part 1/2 has not run") {
		t.Fatalf("ReadInfo while part 0/2 runs: %q, %v", info.Stopped, err)
	}
}

// A Cache with a ShardPrefix names its shards with it, and its Manifest lists only
// those: another part's shards in the same directory are that part's to record.
func TestShardPrefixManifest(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir, Options{ShardPrefix: Part{0, 2}.ShardPrefix()})
	b := open(t, dir, Options{ShardPrefix: Part{1, 2}.ShardPrefix()})
	put(t, newCoder(t, a), testKey(0), 0, testImage(1, 8, 8, false))
	put(t, newCoder(t, b), testKey(1), 1, testImage(2, 8, 8, false))
	for _, tc := range []struct {
		c    *Cache
		want string
	}{{a, "part-0-of-2-"}, {b, "part-1-of-2-"}} {
		m, err := tc.c.Manifest(testSpec)
		if err != nil {
			t.Fatal(err)
		}
		if len(m) != 1 || !strings.HasPrefix(m[0].Name, tc.want) || m[0].Records != 1 {
			t.Fatalf("manifest of %s: %+v", tc.want, m)
		}
	}
	if _, err := Open(dir, &Options{ShardPrefix: "../x"}); err == nil || !strings.Contains(err.Error(), "ShardPrefix") {
		t.Fatalf("ShardPrefix ../x: %v", err)
	}
}
