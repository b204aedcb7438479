package cache

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
)

// countingFS counts the files opened in it.
type countingFS struct {
	fs.FS
	opens atomic.Int64
}

func (c *countingFS) Open(name string) (fs.File, error) {
	c.opens.Add(1)
	return c.FS.Open(name)
}

// remoteCopy moves dir's shard files into a new directory, leaving the indexes, and
// returns that directory.
func remoteCopy(t *testing.T, dir string) string {
	t.Helper()
	remote := t.TempDir()
	for _, sh := range files(t, dir, shardExt) {
		if err := os.Rename(sh, filepath.Join(remote, filepath.Base(sh))); err != nil {
			t.Fatal(err)
		}
	}
	return remote
}

// A converted dataset whose shard files are kept elsewhere (Options.Remote) lists every
// record from the indexes, with no problem and without opening a shard; its records
// read the same pixels as the local dataset's, each read opening its shard in Remote. A
// shard gone from Remote, one cut short and one with another header are errors naming
// the shard; VerifyDataset reads through Remote too.
func TestRemoteShards(t *testing.T) {
	dir := t.TempDir()
	const n, w = 15, 64 // five records to a 64 KiB shard
	info := dataset(t, dir, n, w, 64<<10)
	local := open(t, dir, Options{ReadOnly: true})
	want := map[string][]byte{}
	ld := newCoder(t, local)
	for _, r := range local.Records(testSpec) {
		img, _ := mustLoad(t, local, ld, testKey(int(r.Label)))
		want[r.Path] = append([]byte(nil), img.Pix...)
	}

	rdir := remoteCopy(t, dir)
	remote := &countingFS{FS: os.DirFS(rdir)}
	if _, err := Open(dir, &Options{Remote: remote}); err == nil || !strings.Contains(err.Error(), "ReadOnly") {
		t.Errorf("writable cache with Remote: %v", err)
	}
	c := open(t, dir, Options{ReadOnly: true, Remote: remote})
	if ps := c.CheckDataset(info); len(ps) != 0 {
		t.Fatalf("problems: %v", ps)
	}
	refs := c.Records(testSpec)
	if len(refs) != n || remote.opens.Load() != 0 {
		t.Fatalf("%d records listed (want %d), %d shards opened", len(refs), n, remote.opens.Load())
	}
	d := newCoder(t, c)
	for _, r := range refs {
		img, _ := mustLoad(t, c, d, testKey(int(r.Label)))
		if string(img.Pix) != string(want[r.Path]) {
			t.Fatalf("%s: other pixels through Remote", r.Path)
		}
	}
	if got := remote.opens.Load(); got != n {
		t.Errorf("%d opens for %d reads", got, n)
	}
	rep, err := c.VerifyDataset(info, func(p Problem) { t.Errorf("verify: %v", p) })
	if err != nil || rep.Records != n || !rep.OK() {
		t.Errorf("VerifyDataset through Remote: %+v, %v", rep, err)
	}

	// With RemoteMap each shard is opened once, held and mapped: reads twice over return
	// the same pixels without a copy, and Close gives the files back.
	held := &countingFS{FS: os.DirFS(rdir)}
	cm := open(t, dir, Options{ReadOnly: true, Remote: held, RemoteMap: true})
	if ps := cm.CheckDataset(info); len(ps) != 0 {
		t.Fatalf("problems: %v", ps)
	}
	dm := newCoder(t, cm)
	for range 2 {
		for _, r := range cm.Records(testSpec) {
			img, _ := mustLoad(t, cm, dm, testKey(int(r.Label)))
			if string(img.Pix) != string(want[r.Path]) {
				t.Fatalf("%s: other pixels through a mapped Remote", r.Path)
			}
			if cm.Copies(r) {
				t.Fatalf("%s: read with a copy after its shard was mapped", r.Path)
			}
		}
	}
	if got, shards := held.opens.Load(), len(files(t, rdir, shardExt)); got != int64(shards) {
		t.Errorf("%d opens for %d mapped shards read twice over", got, shards)
	}
	if rep, err := cm.VerifyDataset(info, func(p Problem) { t.Errorf("verify mapped: %v", p) }); err != nil || rep.Records != n || !rep.OK() {
		t.Errorf("VerifyDataset through a mapped Remote: %+v, %v", rep, err)
	}
	if err := cm.Close(); err != nil {
		t.Fatal(err)
	}

	// Damage in the remote copies: one shard gone, one cut short, one with another
	// header (a different spec of the same length, checksummed).
	var names []string
	for _, f := range files(t, rdir, shardExt) {
		names = append(names, filepath.Base(f))
	}
	if len(names) < 3 {
		t.Fatalf("%d shards, want 3", len(names))
	}
	os.Remove(filepath.Join(rdir, names[0]))
	if err := os.Truncate(filepath.Join(rdir, names[1]), 100); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(rdir, names[2]))
	if err != nil {
		t.Fatal(err)
	}
	other := encodeShardHeader(S2, strings.Repeat("x", len(testSpec)))
	copy(data, other)
	if err := os.WriteFile(filepath.Join(rdir, names[2]), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mapped := range []bool{false, true} {
		damagedRemote(t, dir, rdir, info, names, mapped)
	}
	c3 := open(t, dir, Options{ReadOnly: true, Remote: os.DirFS(rdir)})
	c3.CheckDataset(info)
	var kinds []Kind
	rep, err = c3.VerifyDataset(info, func(p Problem) { kinds = append(kinds, p.Kind) })
	if err != nil || rep.OK() || rep.DamagedShards != 1 || rep.Lost != 5 || rep.Damaged != 10 {
		t.Errorf("VerifyDataset of damaged remote shards: %+v, %v, %v", rep, err, kinds)
	}

	// An index that is not the one recorded is a problem; a missing one leaves its
	// shard's records unlisted (a remote shard is not scanned).
	os.Remove(filepath.Join(dir, strings.TrimSuffix(names[0], shardExt)+indexExt))
	c4 := open(t, dir, Options{ReadOnly: true, Remote: fstest.MapFS{}})
	ps := c4.CheckDataset(info)
	if len(ps) != 2 || ps[0].Kind != KindIndex || ps[1].Kind != KindChanged || ps[1].Records != 5 {
		t.Errorf("index gone: %v", ps)
	}
}

// damagedRemote reads every record of the dataset in dir whose shards are in rdir, where
// names[0] is gone, names[1] cut short and names[2] has another header: each read of
// theirs fails naming the shard, with and without Options.RemoteMap.
func damagedRemote(t *testing.T, dir, rdir string, info *Info, names []string, mapped bool) {
	t.Helper()
	c2 := open(t, dir, Options{ReadOnly: true, Remote: os.DirFS(rdir), RemoteMap: mapped})
	if ps := c2.CheckDataset(info); len(ps) != 0 {
		t.Fatalf("problems before any read: %v", ps)
	}
	var gone, cut, header int
	for _, r := range c2.Records(testSpec) {
		_, err := c2.Read(r, nil)
		switch r.Shard() {
		case names[0]:
			if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), names[0]) {
				t.Errorf("record of a shard gone from Remote: %v", err)
			}
			gone++
		case names[1]:
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), names[1]) {
				t.Errorf("record of a shard cut short: %v", err)
			}
			cut++
		case names[2]:
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "not the one the dataset recorded") || !strings.Contains(err.Error(), names[2]) {
				t.Errorf("record of a shard with another header: %v", err)
			}
			header++
		}
	}
	if gone == 0 || cut == 0 || header == 0 {
		t.Errorf("%d, %d, %d records read of the damaged shards", gone, cut, header)
	}

}
