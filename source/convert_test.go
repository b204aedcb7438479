package source

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/conveyor-ml/conveyor/pipeline"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/treetest"
)

// Convert stores every good file once, names the bad ones, and a rerun skips what is
// stored, repairs a damaged record and stores nothing else; a loader over the converted
// dataset then reads every sample with its label.
func TestConvertResumesAndRepairs(t *testing.T) {
	dir := treetest.New(t, 2, 6)
	bad := map[string]bool{}
	for kind, rel := range treetest.Corrupt(t, dir) {
		if kind != "misnamed" && kind != "unreadable" { // both decode (as root, unreadable reads)
			bad[rel] = true
		}
	}
	src, err := Dir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	c := openCache(t, dst, cache.S2)
	opts := &pipeline.ConvertOptions{Decode: decode.Options{Resize: decode.ResizePolicy{Mode: decode.ResizeShorter, Size: 32}}, Workers: 3, Logf: t.Logf}
	rep, err := pipeline.Convert(context.Background(), src, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	good := src.Len() - len(bad)
	if rep.Stored != good || rep.Bad != len(bad) || len(rep.BadFiles) != len(bad) || rep.Done != src.Len() {
		t.Fatalf("first run: %+v; want %d stored, %d bad", *rep, good, len(bad))
	}
	for _, e := range rep.BadFiles {
		if _, ok := bad[e.Path]; !ok {
			t.Errorf("reported %q, which is not one of the damaged files", e.Path)
		}
	}
	info, err := cache.ReadInfo(dst)
	if err != nil || !info.Complete || info.Stored != good || len(info.Classes) != 2 {
		t.Fatalf("info %+v, %v", info, err)
	}
	refs := c.Records(rep.Spec)
	treetest.FlipBit(t, filepath.Join(dst, refs[0].Shard()), refs[0].Offset(), int64(refs[0].Bytes))
	rep2, err := pipeline.Convert(context.Background(), src, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep2.Stored != 1 || rep2.Repaired != 1 || rep2.Skipped != good-1 {
		t.Fatalf("rerun: %+v; want 1 stored (repaired), %d skipped", *rep2, good-1)
	}

	conv, err := OpenConverted(dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conv.Close()
	if conv.Len() != good {
		t.Fatalf("converted dataset has %d samples, want %d", conv.Len(), good)
	}
	cfg := testConfig(2)
	ld := newLoader(t, conv, cfg)
	got := collect(t, ld, context.Background(), 0, 0)
	if st := ld.Stats(); st.Bad.Samples != 0 || got.batches == 0 || ld.Stats().Backends.Decode != "cache:s2" {
		t.Fatalf("%d bad samples, %d batches, backend %s", st.Bad.Samples, got.batches, ld.Stats().Backends.Decode)
	}
	for i, idx := range got.indices {
		if conv.Label(int(idx)) != int(got.labels[i]) {
			t.Fatalf("sample %d: label %d, dataset says %d", idx, got.labels[i], conv.Label(int(idx)))
		}
	}
}
