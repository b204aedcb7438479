package cache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// linkDataset makes in a new directory a converted dataset whose files are symbolic
// links to dir's, as git-annex, DVC or a farm of links leave them, and returns it.
func linkDataset(t *testing.T, dir string) string {
	t.Helper()
	farm := t.TempDir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), shardExt) || strings.HasSuffix(e.Name(), indexExt) || e.Name() == InfoName {
			if err := os.Symlink(filepath.Join(dir, e.Name()), filepath.Join(farm, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	return farm
}

// TestSymlinkedShards: shards and indexes that are symbolic links are followed: listed,
// checked against the manifest and verified record by record. They were skipped, and a
// dataset of links read as one without records, with nothing said about why. A link
// whose content is absent (git-annex before "git annex get") is a missing shard, named
// as a link.
func TestSymlinkedShards(t *testing.T) {
	target := t.TempDir()
	const n = 15
	info := dataset(t, target, n, 64, 64<<10)
	if err := WriteInfo(target, info); err != nil {
		t.Fatal(err)
	}
	farm := linkDataset(t, target)
	got, err := ReadInfo(farm)
	if err != nil {
		t.Fatal(err)
	}
	c := open(t, farm, Options{ReadOnly: true})
	if st := c.Stats(); st.Shards != len(info.Shards) || st.Records != n {
		t.Fatalf("linked dataset: %d shards, %d records; want %d, %d", st.Shards, st.Records, len(info.Shards), n)
	}
	if ps := c.CheckDataset(got); len(ps) != 0 {
		t.Errorf("CheckDataset: %+v", ps)
	}
	rep, err := c.VerifyDataset(got, func(p Problem) { t.Errorf("verify: %+v", p) })
	if err != nil || rep.Shards != len(info.Shards) || rep.Records != n || !rep.OK() {
		t.Errorf("VerifyDataset: %+v, %v", rep, err)
	}

	// Content not fetched: the link to one shard points at nothing.
	victim := info.Shards[0].Name
	if err := os.Rename(filepath.Join(target, victim), filepath.Join(target, victim+".away")); err != nil {
		t.Fatal(err)
	}
	c2 := open(t, farm, Options{ReadOnly: true})
	ps := c2.CheckDataset(got)
	if len(ps) != 1 || ps[0].Kind != KindMissing || !strings.Contains(ps[0].Err.Error(), "symbolic link to "+filepath.Join(target, victim)) {
		t.Errorf("a dangling link: %+v", ps)
	}
}
