package cache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
)

// TestRoundTrip stores images of several sizes with each codec, then reads them back
// from the Cache that wrote them and from a new one opened on the same directory.
func TestRoundTrip(t *testing.T) {
	sizes := [][2]int{{1, 1}, {5, 3}, {9, 9}, {40, 25}, {64, 64}, {300, 200}}
	for _, codec := range Codecs {
		t.Run(string(codec), func(t *testing.T) {
			dir := t.TempDir()
			c := open(t, dir, Options{Codec: codec})
			d := newCoder(t, c)
			want := map[ID]*decode.Image{}
			for i, sz := range sizes {
				k := testKey(i)
				img := testImage(uint64(i), sz[0], sz[1], codec.Lossless())
				want[k.ID()] = img
				put(t, d, k, i+7, img)
			}
			check := func(c *Cache, d *Coder) {
				t.Helper()
				for i := range sizes {
					k := testKey(i)
					got, r := mustLoad(t, c, d, k)
					if r.Path != k.Path || r.Label != int32(i+7) || r.Codec != codec || r.SourceSize != k.Size || r.SourceModTime != k.ModTime ||
						int(r.Width) != sizes[i][0] || int(r.Height) != sizes[i][1] || r.ID() != k.ID() || r.Spec() != testSpec ||
						!strings.HasSuffix(r.Shard(), shardExt) || r.Bytes <= recordFixed+len(k.Path) {
						t.Errorf("record %d: Ref %+v (spec %q, shard %s) does not match its key %+v", i, r, r.Spec(), r.Shard(), k)
					}
					if codec.Lossless() {
						if diff := samePixels(got, want[k.ID()]); diff != "" {
							t.Errorf("%s: %s", k.Path, diff)
						}
						continue
					}
					if got.Width != sizes[i][0] || got.Height != sizes[i][1] {
						t.Errorf("%s: %dx%d, want %dx%d", k.Path, got.Width, got.Height, sizes[i][0], sizes[i][1])
					} else if e := meanAbsDiff(got, want[k.ID()]); e > 3 {
						t.Errorf("%s: mean absolute error %.2f after JPEG, want ≤ 3", k.Path, e)
					}
				}
				if s := c.Stats(); s.Corrupt != 0 || s.Records != len(sizes) {
					t.Errorf("Stats %+v: want %d records, none corrupt", s, len(sizes))
				}
			}
			check(c, d)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			c2 := open(t, dir, Options{Codec: S2, ReadOnly: true}) // records keep the codec they were written with
			check(c2, newCoder(t, c2))
		})
	}
}

// TestLoadReusesImage loads records of different codecs and sizes, one after another,
// into the same Image, as a training loop does. A Raw record's image shares the Coder's
// read buffer, and the next Load must not decode into the memory it reads from.
func TestLoadReusesImage(t *testing.T) {
	dir := t.TempDir()
	var keys []Key
	want := map[ID]*decode.Image{}
	for i, codec := range []Codec{Raw, S2, Zstd, JPEG, Raw, S2} {
		c := open(t, dir, Options{Codec: codec})
		d := newCoder(t, c)
		for j, sz := range [][2]int{{16, 16}, {48, 40}, {8, 30}} {
			k := testKey(10*i + j)
			img := testImage(uint64(10*i+j), sz[0], sz[1], codec.Lossless())
			put(t, d, k, 0, img)
			keys, want[k.ID()] = append(keys, k), img
		}
		c.Close()
	}
	c := open(t, dir, Options{ReadOnly: true})
	d := newCoder(t, c)
	var dst decode.Image
	for round := range 2 {
		for _, k := range keys {
			r, ok := c.Lookup(k)
			if !ok {
				t.Fatalf("%s: miss", k.Path)
			}
			got, err := d.Load(&dst, r)
			if err != nil {
				t.Fatalf("round %d: Load(%s, %s): %v", round, k.Path, r.Codec, err)
			}
			if got != &dst {
				t.Errorf("Load returned %p, not its dst %p", got, &dst)
			}
			if r.Codec.Lossless() {
				if diff := samePixels(got, want[k.ID()]); diff != "" {
					t.Errorf("round %d: %s (%s): %s", round, k.Path, r.Codec, diff)
				}
			} else if e := meanAbsDiff(got, want[k.ID()]); e > 3 {
				t.Errorf("round %d: %s: mean absolute error %.2f", round, k.Path, e)
			}
		}
	}
}

// TestPutPaddedImage stores an image whose rows are padded: the record holds the
// packed pixels.
func TestPutPaddedImage(t *testing.T) {
	c := open(t, t.TempDir(), Options{})
	d := newCoder(t, c)
	want := testImage(1, 7, 5, true)
	padded := &decode.Image{Pix: make([]byte, 5*32), Width: 7, Height: 5, Stride: 32}
	for y := range 5 {
		copy(padded.Row(y), want.Row(y))
	}
	if err := d.Put(testKey(1), 0, padded); err != nil {
		t.Fatal(err)
	}
	got, _ := mustLoad(t, c, d, testKey(1))
	if diff := samePixels(got, want); diff != "" {
		t.Error(diff)
	}
}

// TestRecords checks that Records lists one record per path of a spec, sorted by path,
// the one stored last when a path was stored under several keys.
func TestRecords(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, Options{ShardBytes: 1 << 16})
	d := newCoder(t, c)
	key := func(path string, mtime int64) Key {
		return Key{Spec: testSpec, Path: path, Size: 10, ModTime: mtime}
	}
	// Stored out of order; c.jpg twice in the same shard, a.jpg again in a later shard.
	put(t, d, key("c.jpg", 1), 1, testImage(1, 4, 4, true))
	put(t, d, key("a.jpg", 1), 1, testImage(2, 4, 4, true))
	put(t, d, key("c.jpg", 2), 2, testImage(3, 4, 4, true))
	put(t, d, Key{Spec: "other", Path: "b.jpg"}, 9, testImage(4, 4, 4, true))
	c.Close()
	c = open(t, dir, Options{ShardBytes: 1 << 16})
	d = newCoder(t, c)
	put(t, d, key("a.jpg", 3), 3, testImage(5, 4, 4, true))
	put(t, d, key("b.jpg", 1), 1, testImage(6, 4, 4, true))

	check := func(c *Cache) {
		t.Helper()
		var got []string
		for _, r := range c.Records(testSpec) {
			got = append(got, fmt.Sprintf("%s@%d", r.Path, r.SourceModTime))
		}
		if want := "a.jpg@3 b.jpg@1 c.jpg@2"; strings.Join(got, " ") != want {
			t.Errorf("Records = %v, want %s", got, want)
		}
		if r := c.Records("other"); len(r) != 1 || r[0].Label != 9 {
			t.Errorf(`Records("other") = %+v`, r)
		}
		if r := c.Records("none"); len(r) != 0 {
			t.Errorf(`Records("none") = %+v`, r)
		}
		if s := c.Specs(); len(s) != 2 || s[testSpec] != 5 || s["other"] != 1 {
			t.Errorf("Specs = %v, want 5 of %q and 1 of other", s, testSpec)
		}
	}
	check(c)
	c.Close()
	check(open(t, dir, Options{ReadOnly: true}))
}

// TestRefreshSeesOtherCache shares a directory between two Caches of one process.
func TestRefreshSeesOtherCache(t *testing.T) {
	dir := t.TempDir()
	reader := open(t, dir, Options{})
	writer := open(t, dir, Options{ShardBytes: 1 << 16})
	d := newCoder(t, writer)
	for i := range 30 {
		put(t, d, testKey(i), i, testImage(uint64(i), 30, 30, true))
		if i == 10 {
			if err := reader.Refresh(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, ok := reader.Lookup(testKey(20)); ok {
		t.Fatal("reader found a record stored after its last Refresh")
	}
	if err := reader.Refresh(); err != nil {
		t.Fatal(err)
	}
	rd := newCoder(t, reader)
	for i := range 30 {
		got, _ := mustLoad(t, reader, rd, testKey(i))
		if diff := samePixels(got, testImage(uint64(i), 30, 30, true)); diff != "" {
			t.Errorf("%d: %s", i, diff)
		}
	}
	if s, w := reader.Stats(), writer.Stats(); s.Shards != w.Shards || s.Bytes != w.Bytes || s.Bytes != diskBytes(t, dir) {
		t.Errorf("reader sees %d shards, %d bytes; writer %d, %d; disk %d bytes", s.Shards, s.Bytes, w.Shards, w.Bytes, diskBytes(t, dir))
	}
}

// TestConcurrentUse runs Put, Lookup, Load, Verify, Refresh and Stats from several
// goroutines at once; run with -race.
func TestConcurrentUse(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, Options{ShardBytes: 1 << 16})
	const workers, each = 4, 100
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	for w := range workers {
		wg.Go(func() {
			d := c.NewCoder()
			defer d.Close()
			var dst decode.Image
			for i := w * each; i < (w+1)*each; i++ {
				img := testImage(uint64(i), 20, 20, true)
				cp := *img
				cp.Pix = append([]byte(nil), img.Pix...)
				if err := d.Put(testKey(i), i, &cp); err != nil {
					errs <- err
					return
				}
				// Read back a record another worker may be writing.
				j := (i + each/2) % (workers * each)
				if r, ok := c.Lookup(testKey(j)); ok {
					got, err := d.Load(&dst, r)
					if err != nil {
						errs <- err
						return
					}
					if diff := samePixels(got, testImage(uint64(j), 20, 20, true)); diff != "" {
						errs <- fmt.Errorf("%d: %s", j, diff)
						return
					}
				}
			}
		})
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := c.Verify(func(p Problem) { errs <- fmt.Errorf("Verify: %+v", p) }); err != nil {
				errs <- err
			}
			if err := c.Refresh(); err != nil {
				errs <- err
			}
			c.Stats()
			c.Records(testSpec)
		}
	})
	wg.Wait()
	close(stop)
	bg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := c.Stats(); s.Records != workers*each || s.Written != workers*each || s.Corrupt != 0 {
		t.Errorf("Stats %+v: want %d records written and indexed", s, workers*each)
	}
}

func TestReadOnly(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "missing"), &Options{ReadOnly: true}); err == nil {
		t.Error("read-only Open of a missing directory succeeded")
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(file, &Options{ReadOnly: true}); err == nil {
		t.Error("read-only Open of a file succeeded")
	}

	dir := t.TempDir()
	w := open(t, dir, Options{})
	put(t, newCoder(t, w), testKey(1), 1, testImage(1, 8, 8, true))
	w.Close()
	before, _ := os.ReadDir(dir)

	empty := t.TempDir()
	c := open(t, empty, Options{ReadOnly: true})
	if err := newCoder(t, c).Put(testKey(1), 1, testImage(1, 8, 8, true)); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only Put: %v, want ErrReadOnly", err)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Errorf("read-only Open and Put created %v", ents)
	}

	c = open(t, dir, Options{ReadOnly: true})
	d := newCoder(t, c)
	got, _ := mustLoad(t, c, d, testKey(1))
	if diff := samePixels(got, testImage(1, 8, 8, true)); diff != "" {
		t.Error(diff)
	}
	if err := d.Put(testKey(2), 1, testImage(2, 8, 8, true)); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only Put: %v, want ErrReadOnly", err)
	}
	if after, _ := os.ReadDir(dir); len(after) != len(before) {
		t.Errorf("read-only use changed the directory from %v to %v", before, after)
	}
}

func TestOptions(t *testing.T) {
	var o Options
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if want := "codec=s2 quality=90 max_bytes=0 shard_bytes=1073741824 read_only=false"; o.String() != want {
		t.Errorf("defaults print as %q, want %q", o.String(), want)
	}
	c := open(t, t.TempDir(), Options{Codec: JPEG, Quality: 75, MaxBytes: 1 << 20})
	if got := c.Options(); got.Codec != JPEG || got.Quality != 75 || got.MaxBytes != 1<<20 || got.ShardBytes != 1<<30 || got.Logf == nil {
		t.Errorf("effective options %v", &got)
	}
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"unknown codec", Options{Codec: "png"}},
		{"codec case", Options{Codec: "S2"}},
		{"negative quality", Options{Quality: -1}},
		{"quality 101", Options{Quality: 101}},
		{"negative MaxBytes", Options{MaxBytes: -1}},
		{"tiny shards", Options{ShardBytes: 1 << 10}},
		{"negative shards", Options{ShardBytes: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.EnsureDefaults()
			if err := o.Validate(); err == nil {
				t.Errorf("Validate(%v) = nil", &o)
			}
			if c, err := Open(t.TempDir(), &tc.o); err == nil {
				c.Close()
				t.Errorf("Open with %v succeeded", &o)
			}
		})
	}
	for _, q := range []int{1, 100} {
		o := Options{Quality: q}
		o.EnsureDefaults()
		if err := o.Validate(); err != nil {
			t.Errorf("Quality %d: %v", q, err)
		}
	}
}

// Validate reports every invalid field at once, not only the first.
func TestOptionsValidateReportsEveryProblem(t *testing.T) {
	err := (&Options{Codec: "png", Quality: 101, MaxBytes: -1, ShardPrefix: "a/b"}).EnsureDefaults().Validate()
	if err == nil {
		t.Fatal("Validate accepted four invalid fields")
	}
	for _, want := range []string{`"png"`, "Quality 101", "MaxBytes -1", `ShardPrefix "a/b"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %q, want it to mention %q", err, want)
		}
	}
}

func TestParseCodec(t *testing.T) {
	for _, c := range Codecs {
		if got, err := ParseCodec(string(c)); err != nil || got != c {
			t.Errorf("ParseCodec(%q) = %q, %v", c, got, err)
		}
		if got, err := codecByID(uint32(c.id())); err != nil || got != c {
			t.Errorf("codecByID(%d) = %q, %v, want %q", c.id(), got, err, c)
		}
	}
	for _, s := range []string{"", "RAW", "jpg", "s2 ", "zstd1"} {
		if c, err := ParseCodec(s); err == nil {
			t.Errorf("ParseCodec(%q) = %q, want an error", s, c)
		}
	}
	if _, err := codecByID(uint32(len(Codecs))); err == nil {
		t.Error("codecByID accepts an unknown id")
	}
	if !Raw.Lossless() || !S2.Lossless() || !Zstd.Lossless() || JPEG.Lossless() {
		t.Error("Lossless is wrong")
	}
}

// TestPutLimits checks the lengths a record header can hold.
func TestPutLimits(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, Options{})
	d := newCoder(t, c)
	img := testImage(1, 2, 2, true)
	if err := d.Put(Key{Spec: testSpec, Path: strings.Repeat("p", maxPath+1)}, 0, img); err == nil {
		t.Error("Put of a path too long for a header succeeded")
	}
	if err := d.Put(Key{Spec: strings.Repeat("s", maxSpec+1), Path: "a"}, 0, img); err == nil {
		t.Error("Put of a spec too long for a shard header succeeded")
	}
	long := Key{Spec: strings.Repeat("s", maxSpec), Path: strings.Repeat("p", maxPath)}
	put(t, d, long, 3, img)
	c.Close()
	c = open(t, dir, Options{ReadOnly: true})
	got, r := mustLoad(t, c, newCoder(t, c), long)
	if diff := samePixels(got, img); diff != "" || r.Path != long.Path || r.Spec() != long.Spec {
		t.Errorf("longest path and spec do not round trip: %s", diff)
	}
}

func TestInfo(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadInfo(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadInfo of an empty directory: %v, want fs.ErrNotExist", err)
	}
	info := &Info{FormatVersion: FormatVersion, Spec: testSpec, Codec: Zstd, Source: "/data/train",
		Classes: []string{"cat", "dog"}, Samples: 10, Stored: 9, Bad: 1, Complete: true}
	info.Updated = info.Updated.AddDate(2025, 2, 3).UTC()
	if err := WriteInfo(dir, info); err != nil {
		t.Fatal(err)
	}
	info.Stored = 10
	if err := WriteInfo(dir, info); err != nil { // replaces
		t.Fatal(err)
	}
	got, err := ReadInfo(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Updated.Equal(info.Updated) {
		t.Errorf("Updated = %v, want %v", got.Updated, info.Updated)
	}
	got.Updated = info.Updated
	if fmt.Sprint(*got) != fmt.Sprint(*info) {
		t.Errorf("ReadInfo = %+v, want %+v", got, info)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("WriteInfo left %v", ents)
	}
	if fi, err := os.Stat(filepath.Join(dir, InfoName)); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("%s: %v, %v; want mode 0644, readable by the users of a shared dataset", InfoName, fi.Mode(), err)
	}
	for name, bad := range map[string]string{
		"version": `{"format_version": 99, "spec": "x"}`,
		"spec":    `{"format_version": 1}`,
		"json":    `{"format_version": 1,`,
	} {
		if err := os.WriteFile(filepath.Join(dir, InfoName), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadInfo(dir); err == nil {
			t.Errorf("ReadInfo accepts a bad %s", name)
		}
	}
	if err := WriteInfo(filepath.Join(dir, "missing"), info); err == nil {
		t.Error("WriteInfo into a missing directory succeeded")
	}
}

// TestShardRotation stores records of several sizes: a shard grows past ShardBytes only
// when it holds a single record larger than that.
func TestShardRotation(t *testing.T) {
	dir := t.TempDir()
	const shardBytes = 1 << 16
	c := open(t, dir, Options{Codec: Raw, ShardBytes: shardBytes})
	d := newCoder(t, c)
	sizes := []int{40, 90, 10, 160, 5, 60, 60, 60, 200, 1}
	for i, w := range sizes {
		put(t, d, testKey(i), i, testImage(uint64(i), w, w, true))
	}
	perShard := map[string]int{}
	for i := range sizes {
		perShard[mustRef(t, c, testKey(i)).Shard()]++
	}
	for _, f := range files(t, dir, shardExt) {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if n := perShard[filepath.Base(f)]; fi.Size() > shardBytes && n != 1 {
			t.Errorf("%s: %d bytes with %d records, ShardBytes %d", filepath.Base(f), fi.Size(), n, shardBytes)
		}
	}
	if len(perShard) < 4 {
		t.Errorf("%d shards, want the large records alone in theirs", len(perShard))
	}
	checkSizes := func(c *Cache) {
		d := newCoder(t, c)
		for i, w := range sizes {
			got, _ := mustLoad(t, c, d, testKey(i))
			if diff := samePixels(got, testImage(uint64(i), w, w, true)); diff != "" {
				t.Errorf("record %d: %s", i, diff)
			}
		}
	}
	checkSizes(c)
	c.Close()
	checkSizes(open(t, dir, Options{ReadOnly: true}))
}

// TestClose checks that Close may be called twice and that a Ref used after Close
// fails instead of crashing, whether its shard was read or mapped.
func TestClose(t *testing.T) {
	dir := t.TempDir()
	fill(t, dir, Options{}, 3, 8)
	for _, readOnly := range []bool{false, true} {
		c, err := Open(dir, &Options{ReadOnly: readOnly})
		if err != nil {
			t.Fatal(err)
		}
		d := c.NewCoder()
		r := mustRef(t, c, testKey(1))
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if _, ok := c.Lookup(testKey(1)); ok {
			t.Error("Lookup after Close hits")
		}
		if _, err := d.Load(new(decode.Image), r); err == nil {
			t.Errorf("ReadOnly=%t: Load after Close succeeded", readOnly)
		}
		d.Close()
	}
}
