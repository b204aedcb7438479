package source

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/conveyor-ml/conveyor/pipeline"

	"github.com/conveyor-ml/conveyor/internal/treetest"
)

func TestShardedViews(t *testing.T) {
	files, err := Dir(treetest.Shared(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := shardedFiles{files, []int{20, 20, 45, 60}} // shard 1 is empty
	sub, err := Subset(files, []int{0, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sub.(pipeline.ShardedSource); ok {
		t.Error("a Subset of a source without shards is a pipeline.ShardedSource")
	}
	cat, err := Concat(a, sub, a)
	if err != nil {
		t.Fatal(err)
	}
	ss, ok := cat.(pipeline.ShardedSource)
	if !ok {
		t.Fatal("Concat of a pipeline.ShardedSource is not one")
	}
	want := []int{20, 45, 60, 61, 62, 63, 83, 108, 123}
	if got := ss.ShardEnds(); !slices.Equal(got, want) {
		t.Errorf("Concat's shards end at %v, want %v", got, want)
	}
	// A subset in index order keeps the runs of each shard; one out of order splits them.
	sub, err = Subset(a, []int{3, 4, 25, 26, 27, 50, 5, 6})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sub.(pipeline.ShardedSource).ShardEnds(), []int{2, 5, 6, 8}; !slices.Equal(got, want) {
		t.Errorf("Subset's shards end at %v, want %v", got, want)
	}
	train, val, err := Split(a, 0.25, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []pipeline.Source{train, val} {
		ends := s.(pipeline.ShardedSource).ShardEnds()
		if len(ends) < 2 || len(ends) > 3 || ends[len(ends)-1] != s.Len() {
			t.Errorf("Split half %v: shards end at %v, want 2 or 3 shards ending at %d", s, ends, s.Len())
		}
	}
	// The loader accepts the view's shards.
	newLoader(t, cat, orderConfig(8, 0, 1, 4))
}

func TestConvertedByShard(t *testing.T) {
	cs, err := OpenConverted(convertTree(t, 2, 40), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	src := cs.ByShard()
	ends := src.ShardEnds()
	names := map[string]bool{}
	for i := range cs.Len() {
		names[cs.Ref(i).Shard()] = true
	}
	if len(ends) != len(names) || len(ends) < 3 {
		t.Fatalf("%d shards listed, %d shard files (want several)", len(ends), len(names))
	}
	// Every shard's samples are one run, in file order, and every sample is there once.
	paths := map[string]bool{}
	for k, end := range ends {
		start := 0
		if k > 0 {
			start = ends[k-1]
		}
		v := src.(*shardedView)
		for i := start; i < end; i++ {
			ref := cs.Ref(int(v.idx[i]))
			if first := cs.Ref(int(v.idx[start])); ref.Shard() != first.Shard() || (i > start && ref.Offset() <= cs.Ref(int(v.idx[i-1])).Offset()) {
				t.Fatalf("shard %d: sample %d is in %s at %d", k, i, ref.Shard(), ref.Offset())
			}
			if src.Path(i) != ref.Path || src.Label(i) != int(ref.Label) {
				t.Fatalf("sample %d: %s label %d, its record %s label %d", i, src.Path(i), src.Label(i), ref.Path, ref.Label)
			}
			paths[ref.Path] = true
		}
	}
	if len(paths) != cs.Len() || src.Len() != cs.Len() {
		t.Fatalf("%d distinct samples of %d", len(paths), cs.Len())
	}
	ref := globalBatches(t, src, func(int) *pipeline.Config { return orderConfig(8, 0, 1, 2) }, 1, 0, 0)
	got := globalBatches(t, src, func(r int) *pipeline.Config { return orderConfig(4, r, 2, 2) }, 2, 0, 0)
	if !slices.EqualFunc(got, ref, slices.Equal) {
		t.Errorf("world 2: %v, world 1: %v", got, ref)
	}
	// Its shards are sorted by class: the default block spans many of them.
	ld := newLoader(t, src, orderConfig(8, 0, 1, 2))
	if b := ld.Config().Order.ShuffleBlock; b != byShardBlock {
		t.Errorf("default ShuffleBlock over ByShard %d, want %d", b, byShardBlock)
	}
	ld.Close()
}

// randomEnds cuts n samples into shards of minLen to maxLen samples (the last may be
// shorter).
func randomEnds(n, minLen, maxLen int, seed uint64) []int {
	r := rand.New(rand.NewPCG(seed, 1))
	var ends []int
	for at := 0; at < n; {
		at = min(n, at+minLen+r.IntN(maxLen-minLen+1))
		ends = append(ends, at)
	}
	return ends
}

// shardedFiles is a FileSource declaring shards.
type shardedFiles struct {
	pipeline.FileSource
	ends []int
}

func (s shardedFiles) ShardEnds() []int { return s.ends }

func (s shardedFiles) ShuffleBlock() int { return 0 }

// shardedTree is the shared test tree (60 files) in shards of 7 to 13 samples.
func shardedTree(t *testing.T) shardedFiles {
	t.Helper()
	src, err := Dir(treetest.Shared(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	return shardedFiles{src, randomEnds(src.Len(), 7, 13, 11)}
}

// orderConfig reads files without decoding them: enough to see the order.
func orderConfig(batch, rank, world, parts int) *pipeline.Config {
	cfg := testConfig(1)
	cfg.Batch.Size, cfg.Order.Rank, cfg.Order.World = batch, rank, world
	cfg.Order.Mode, cfg.Order.Partitions = pipeline.ShardOrder, parts
	cfg.StopAfter = pipeline.ReadStage
	return cfg
}

// globalBatches runs every rank of world from global cursor and assembles global batch
// by global batch (rank 0's part first); it checks that all ranks report the same
// cursors.
func globalBatches(t *testing.T, src pipeline.Source, cfgOf func(rank int) *pipeline.Config, world, epoch, cursor int) [][]int64 {
	t.Helper()
	var out [][]int64
	var cursors []int
	for r := range world {
		ld := newLoader(t, src, cfgOf(r))
		k := 0
		for b, err := range ld.EpochFrom(context.Background(), epoch, cursor) {
			if err != nil {
				t.Fatalf("world %d rank %d: %v", world, r, err)
			}
			if r == 0 {
				out = append(out, nil)
				cursors = append(cursors, b.Cursor)
			} else if k >= len(out) || b.Cursor != cursors[k] {
				t.Fatalf("world %d rank %d batch %d: cursor %d, rank 0's %v", world, r, k, b.Cursor, cursors)
			}
			if b.Cursor != b.GlobalCursor {
				t.Fatalf("ShardOrder batch cursor %d differs from GlobalCursor %d", b.Cursor, b.GlobalCursor)
			}
			out[k] = append(out[k], b.Indices...)
			k++
			b.Release()
		}
		if k != len(out) {
			t.Fatalf("world %d: rank %d delivered %d batches, rank 0 %d", world, r, k, len(out))
		}
	}
	return out
}
