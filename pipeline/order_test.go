package pipeline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/internal/treetest"
)

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

// shardSampler is the sampler New builds for ShardOrder.
func shardSampler(n int, ends []int, parts, block, batch, rank, world int, seed uint64) *sampler {
	return &sampler{n: n, seed: seed, shuffle: true, rank: rank, world: world, parts: parts, ends: ends, block: block, batch: batch}
}

// globalOrder assembles the global order of an epoch at world size world (batch
// samples per global batch) from every rank's order: global batch b is rank 0's batch b,
// then rank 1's, ... It checks that every rank's order has the same length and that
// sampler.global maps each rank position to where the sample lands.
func globalOrder(t *testing.T, n int, ends []int, parts, block, global, world, epoch int, dropUneven bool) []int32 {
	t.Helper()
	bs := global / world
	var orders [][]int32
	var samplers []*sampler
	for r := range world {
		s := shardSampler(n, ends, parts, block, bs, r, world, 9)
		s.dropUneven = dropUneven
		o := s.order(epoch, nil)
		if len(o) != s.shardLen() {
			t.Fatalf("world %d rank %d: %d samples, shardLen %d", world, r, len(o), s.shardLen())
		}
		if ends != nil && cap(s.perm) > n/world+parts {
			t.Fatalf("world %d rank %d: %d samples of scratch for its %d of %d", world, r, cap(s.perm), len(o), n)
		}
		if r > 0 && len(o) != len(orders[0]) {
			t.Fatalf("world %d: rank %d has %d samples, rank 0 %d", world, r, len(o), len(orders[0]))
		}
		orders, samplers = append(orders, o), append(samplers, s)
	}
	var g []int32
	for start := 0; start < len(orders[0]); start += bs {
		for _, o := range orders {
			g = append(g, o[start:min(start+bs, len(o))]...)
		}
	}
	for r, o := range orders {
		for x, i := range o {
			if p := samplers[r].global(x); g[p] != i {
				t.Fatalf("world %d rank %d: position %d maps to global %d holding %d, not %d", world, r, x, p, g[p], i)
			}
		}
	}
	return g
}

func TestShardOrderSameGlobalBatchesForAnyWorld(t *testing.T) {
	const parts, global, block = 8, 64, 100
	for _, tc := range []struct {
		n          int
		dropUneven bool
	}{{1000, false}, {1003, false}, {1003, true}} {
		ends := randomEnds(tc.n, 20, 40, 3)
		ref := globalOrder(t, tc.n, ends, parts, block, global, 1, 0, tc.dropUneven)
		for _, w := range []int{2, 4, 8} {
			g := globalOrder(t, tc.n, ends, parts, block, global, w, 0, tc.dropUneven)
			if !slices.Equal(g, ref) {
				t.Errorf("n=%d dropUneven=%t: the global order at world %d differs from world 1's", tc.n, tc.dropUneven, w)
			}
		}
		// Every sample once; padding repeats a partition's first samples.
		count := make([]int, tc.n)
		for _, i := range ref {
			count[i]++
		}
		seen, twice := 0, 0
		for _, c := range count {
			seen += min(c, 1)
			twice += max(c-1, 0)
		}
		wantSeen, wantTwice := tc.n, parts*((tc.n+parts-1)/parts)-tc.n
		if tc.dropUneven {
			wantSeen, wantTwice = parts*(tc.n/parts), 0
		}
		if seen != wantSeen || twice != wantTwice {
			t.Errorf("n=%d dropUneven=%t: %d distinct samples and %d repeats, want %d and %d", tc.n, tc.dropUneven, seen, twice, wantSeen, wantTwice)
		}
	}
}

func TestShardOrderChangesPerEpochAndWithSeedAndPartitions(t *testing.T) {
	const n = 1000
	ends := randomEnds(n, 20, 40, 3)
	e0 := shardSampler(n, ends, 8, 100, 64, 0, 1, 9).order(0, nil)
	e1 := shardSampler(n, ends, 8, 100, 64, 0, 1, 9).order(1, nil)
	s2 := shardSampler(n, ends, 8, 100, 64, 0, 1, 10).order(0, nil)
	p4 := shardSampler(n, ends, 4, 100, 64, 0, 1, 9).order(0, nil)
	again := shardSampler(n, ends, 8, 100, 64, 0, 1, 9).order(0, nil)
	if !slices.Equal(e0, again) {
		t.Fatal("the same (seed, epoch, partitions) gave two orders")
	}
	for name, o := range map[string][]int32{"epoch 1": e1, "seed 10": s2, "4 partitions": p4} {
		same := 0
		for i := range o {
			if o[i] == e0[i] {
				same++
			}
		}
		if same > n/20 {
			t.Errorf("%s: %d of %d positions hold epoch 0's sample", name, same, n)
		}
	}
	// Shards are reshuffled among partitions each epoch, not only within them.
	firstShards := func(o []int32) []int {
		var s []int
		for _, i := range o[:64] {
			s = append(s, sort.SearchInts(ends, int(i)+1))
		}
		slices.Sort(s)
		return slices.Compact(s)
	}
	if slices.Equal(firstShards(e0), firstShards(e1)) {
		t.Errorf("epochs 0 and 1 start from the same shards %v", firstShards(e0))
	}
}

// TestShardOrderLocality bounds the shards a rank touches: over any stretch of k
// batches, a partition's reads lie within ceil(k·per/smallest block)+1 consecutive
// blocks, which span at most that many of the largest blocks plus two shards; a rank reads
// parts/world partitions. Over an epoch, a shard is read by at most two ranks (one that
// straddles a partition boundary). The permutation of SampleOrder breaks both bounds.
func TestShardOrderLocality(t *testing.T) {
	const n, parts, global, block, minLen = 20000, 8, 64, 120, 30
	ends := randomEnds(n, minLen, 50, 5)
	shardOf := func(i int32) int { return sort.SearchInts(ends, int(i)+1) }
	for _, world := range []int{1, 4, 8} {
		bs := global / world
		per := global / parts
		readers := map[int]map[int]bool{} // shard -> ranks
		for r := range world {
			s := shardSampler(n, ends, parts, block, bs, r, world, 1)
			for _, epochOrder := range [][]int32{s.order(0, nil), s.order(3, nil)} {
				for _, k := range []int{1, 4, 16} {
					minBlock, maxBlock := block-block/4, block+block/4
					blocks := (k*per+minBlock-1)/minBlock + 1
					bound := parts / world * (blocks*maxBlock/minLen + 2)
					worst := 0
					for start := 0; start+k*bs <= len(epochOrder); start += bs {
						seen := map[int]bool{}
						for _, i := range epochOrder[start : start+k*bs] {
							seen[shardOf(i)] = true
						}
						worst = max(worst, len(seen))
					}
					if worst > bound {
						t.Errorf("world %d rank %d: %d shards in a stretch of %d batches, bound %d", world, r, worst, k, bound)
					}
				}
			}
			for _, i := range s.order(0, nil) {
				if readers[shardOf(i)] == nil {
					readers[shardOf(i)] = map[int]bool{}
				}
				readers[shardOf(i)][r] = true
			}
		}
		for sh, rs := range readers {
			if len(rs) > 2 {
				t.Errorf("world %d: shard %d read by ranks %v, want at most 2", world, sh, rs)
			}
		}
	}
	// The same bound does not hold for a permutation of samples: the test can fail.
	s := &sampler{n: n, seed: 1, shuffle: true, world: 1}
	o := s.order(0, nil)
	seen := map[int]bool{}
	for _, i := range o[:4*global] {
		seen[shardOf(i)] = true
	}
	if bound := parts * ((4*global/parts+block-1)/block + 1) * block / minLen; len(seen) <= bound {
		t.Errorf("SampleOrder touches only %d shards in 4 batches, within ShardOrder's bound %d", len(seen), bound)
	}
}

func TestShardOrderSequential(t *testing.T) {
	ends := []int{10, 20, 30, 40}
	s := &sampler{n: 40, rank: 1, world: 2, parts: 4, ends: ends, block: 5, batch: 4}
	got := s.order(0, nil)
	// Partitions are [0,10), [10,20), [20,30), [30,40); rank 1 reads 2 and 3, two samples
	// of each per global batch of 8.
	want := []int32{20, 21, 30, 31, 22, 23, 32, 33, 24, 25, 34, 35, 26, 27, 36, 37, 28, 29, 38, 39}
	if !slices.Equal(got, want) {
		t.Errorf("sequential rank 1 of 2: %v, want %v", got, want)
	}
}

// shardedFiles is a FileSource declaring shards.
type shardedFiles struct {
	FileSource
	ends []int
}

func (s shardedFiles) ShardEnds() []int { return s.ends }

func (s shardedFiles) ShuffleBlock() int { return 0 }

// shardedTree is the shared test tree (60 files) in shards of 7 to 13 samples.
func shardedTree(t *testing.T) shardedFiles {
	t.Helper()
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	return shardedFiles{src, randomEnds(src.Len(), 7, 13, 11)}
}

// orderConfig reads files without decoding them: enough to see the order.
func orderConfig(batch, rank, world, parts int) *Config {
	cfg := testConfig(1)
	cfg.BatchSize, cfg.Rank, cfg.World = batch, rank, world
	cfg.Order, cfg.Partitions = ShardOrder, parts
	cfg.StopAfter = ReadStage
	return cfg
}

// globalBatches runs every rank of world from global cursor and assembles global batch
// by global batch (rank 0's part first); it checks that all ranks report the same
// cursors.
func globalBatches(t *testing.T, src Source, cfgOf func(rank int) *Config, world, epoch, cursor int) [][]int64 {
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

func TestShardOrderLoaderSameGlobalBatchesForAnyWorld(t *testing.T) {
	src := shardedTree(t)
	const parts, global = 4, 12
	ref := globalBatches(t, src, func(int) *Config { return orderConfig(global, 0, 1, parts) }, 1, 2, 0)
	if len(ref) != 5 {
		t.Fatalf("%d global batches of 60 samples, want 5", len(ref))
	}
	// The ranks' slices are disjoint: the epoch holds every sample once.
	all := slices.Concat(ref...)
	slices.Sort(all)
	if len(all) != 60 || len(slices.Compact(all)) != 60 {
		t.Fatalf("the epoch's global batches hold %d samples, not the 60 once each: %v", len(all), ref)
	}
	for _, w := range []int{2, 4} {
		got := globalBatches(t, src, func(r int) *Config { return orderConfig(global/w, r, w, parts) }, w, 2, 0)
		if !slices.EqualFunc(got, ref, slices.Equal) {
			t.Errorf("world %d: global batches %v, world 1's %v", w, got, ref)
		}
	}
}

func TestShardOrderResumeAtAnotherWorld(t *testing.T) {
	src := shardedTree(t)
	const parts, global, epoch = 4, 12, 1
	whole := globalBatches(t, src, func(r int) *Config { return orderConfig(global/4, r, 4, parts) }, 4, epoch, 0)
	// Stop world 4 after global batch 1: every rank reports the same cursor.
	var cursor int
	for r := range 4 {
		ld := newLoader(t, src, orderConfig(global/4, r, 4, parts))
		for b, err := range ld.Epoch(context.Background(), epoch) {
			if err != nil {
				t.Fatal(err)
			}
			c := b.Cursor
			b.Release()
			if b.Number == 1 {
				if r > 0 && c != cursor {
					t.Fatalf("rank %d stops at cursor %d, rank 0 at %d", r, c, cursor)
				}
				cursor = c
				break
			}
		}
	}
	if cursor != 2*global {
		t.Fatalf("cursor after global batch 1 is %d, want %d", cursor, 2*global)
	}
	for _, w := range []int{2, 1} {
		rest := globalBatches(t, src, func(r int) *Config { return orderConfig(global/w, r, w, parts) }, w, epoch, cursor)
		if !slices.EqualFunc(rest, whole[2:], slices.Equal) {
			t.Errorf("resumed at world %d: %v, want %v", w, rest, whole[2:])
		}
	}
	// A cursor inside a global batch is refused, naming it.
	ld := newLoader(t, src, orderConfig(global/2, 0, 2, parts))
	for _, err := range ld.EpochFrom(context.Background(), epoch, global+6) {
		if err == nil || !strings.Contains(err.Error(), "global cursor 18") {
			t.Errorf("cursor 18 with a global batch of 12: %v", err)
		}
	}
}

// TestShardOrderReplacementsAnyWorld: a bad file's replacement is drawn from its global
// position, so batches with replacements are the same at any world size too.
func TestShardOrderReplacementsAnyWorld(t *testing.T) {
	dir := treetest.New(t, 2, 12)
	treetest.Corrupt(t, dir)
	files, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	src := shardedFiles{files, randomEnds(files.Len(), 5, 9, 1)}
	cfgOf := func(w int) func(int) *Config {
		return func(r int) *Config {
			cfg := orderConfig(8/w, r, w, 2)
			cfg.StopAfter = DecodeStage
			cfg.MaxBadFraction = -1
			return cfg
		}
	}
	ref := globalBatches(t, src, cfgOf(1), 1, 0, 0)
	got := globalBatches(t, src, cfgOf(2), 2, 0, 0)
	if !slices.EqualFunc(got, ref, slices.Equal) {
		t.Errorf("world 2: %v, world 1: %v", got, ref)
	}
	all := slices.Concat(ref...)
	slices.Sort(all)
	if n := len(slices.Compact(all)); n == files.Len() {
		t.Error("no sample was replaced: the damaged tree has no bad file")
	}
}

func TestShardOrderValidation(t *testing.T) {
	src := shardedTree(t)
	for _, tc := range []struct {
		name string
		src  Source
		edit func(*Config)
		want string
	}{
		{"partitions-not-multiple-of-world", src, func(c *Config) { c.Rank, c.World, c.Partitions = 0, 3, 4 }, "Partitions 4 is not a multiple of World 3"},
		{"global-batch", src, func(c *Config) { c.BatchSize = 6 }, "BatchSize×World = 6×1 is not a multiple of Partitions 4"},
		{"negative-partitions", src, func(c *Config) { c.Partitions = -1 }, "Partitions -1 < 1"},
		{"negative-block", src, func(c *Config) { c.ShuffleBlock = -2 }, "ShuffleBlock -2 < 0"},
		{"sample-order-partitions", src, func(c *Config) { c.Order = SampleOrder }, "apply to Order shards only"},
		{"unknown-order", src, func(c *Config) { c.Order = 7 }, "Order Order(7)"},
		{"too-few-samples", src, func(c *Config) { c.Partitions, c.BatchSize = 64, 64 }, "60 samples cannot fill 64 partitions"},
		{"empty-shards", shardedFiles{src.FileSource, nil}, nil, "lists no shards"},
		{"decreasing-shards", shardedFiles{src.FileSource, []int{10, 5, 60}}, nil, "shard 1 ends at sample 5, before shard 0's end 10"},
		{"short-shards", shardedFiles{src.FileSource, []int{10, 50}}, nil, "its shards end at sample 50 but it has 60 samples"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := orderConfig(8, 0, 1, 4)
			if tc.edit != nil {
				tc.edit(cfg)
			}
			ld, err := New(tc.src, cfg)
			if err == nil {
				ld.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// Defaults: Partitions is World, ShuffleBlock four mean shards; String says so.
	cfg := orderConfig(8, 1, 2, 0)
	ld := newLoader(t, src, cfg)
	got := ld.Config()
	wantBlock := 4 * ((60 + len(src.ends) - 1) / len(src.ends))
	if got.Partitions != 2 || got.ShuffleBlock != wantBlock {
		t.Errorf("defaults: Partitions %d, ShuffleBlock %d; want 2, %d", got.Partitions, got.ShuffleBlock, wantBlock)
	}
	if s := got.String(); !strings.Contains(s, fmt.Sprintf("order=shards partitions=2 shuffle_block=%d", wantBlock)) {
		t.Errorf("String: %s", s)
	}
	if o, err := ParseOrder("shards"); o != ShardOrder || err != nil {
		t.Errorf("ParseOrder(shards) = %v, %v", o, err)
	}
	if _, err := ParseOrder("blocks"); err == nil || !strings.Contains(err.Error(), `"blocks"`) {
		t.Errorf("ParseOrder(blocks): %v", err)
	}
}

// TestShardOrderUnshardedSource: a source without shards gets a full permutation split
// into partitions, and the same global batches at any world size.
func TestShardOrderUnshardedSource(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := Source(src).(ShardedSource); ok {
		t.Fatal("Dir is a ShardedSource")
	}
	ref := globalBatches(t, src, func(int) *Config { return orderConfig(8, 0, 1, 4) }, 1, 0, 0)
	got := globalBatches(t, src, func(r int) *Config { return orderConfig(4, r, 2, 4) }, 2, 0, 0)
	if !slices.EqualFunc(got, ref, slices.Equal) {
		t.Errorf("world 2: %v, world 1: %v", got, ref)
	}
	all := slices.Concat(ref...)
	slices.Sort(all)
	if len(slices.Compact(all)) != 60 || slices.IsSorted(slices.Concat(ref...)) {
		t.Errorf("not a permutation of the 60 samples: %v", ref)
	}
}

// BenchmarkOrder is the cost of laying out one epoch of a million samples, which every
// rank pays at each epoch's start: about 5 ms for SampleOrder's permutation and 0.7 ms
// for rank 3 of 8's partitions with ShardOrder (one core of an EPYC).
func BenchmarkOrder(b *testing.B) {
	const n = 1 << 20
	ends := randomEnds(n, 800, 1200, 1)
	for _, bc := range []struct {
		name string
		s    *sampler
	}{
		{"samples", &sampler{n: n, seed: 1, shuffle: true, world: 8}},
		{"shards", shardSampler(n, ends, 8, 4000, 64, 3, 8, 1)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var dst []int32
			for e := range b.N {
				dst = bc.s.order(e, dst)
			}
		})
	}
}

func TestShardOrderDropLastAndMicroBatches(t *testing.T) {
	src := shardedTree(t)
	const parts, global = 4, 16 // 15 samples a partition: 3 global batches of 16 and one of 12
	cfgOf := func(w int, edit func(*Config)) func(int) *Config {
		return func(r int) *Config {
			cfg := orderConfig(global/w, r, w, parts)
			edit(cfg)
			return cfg
		}
	}
	dropLast := func(c *Config) { c.DropLast = true }
	full := globalBatches(t, src, cfgOf(1, func(*Config) {}), 1, 0, 0)
	ref := globalBatches(t, src, cfgOf(1, dropLast), 1, 0, 0)
	if len(full) != 4 || len(full[3]) != 12 || !slices.EqualFunc(ref, full[:3], slices.Equal) {
		t.Fatalf("DropLast at world 1: %v; without: %v", ref, full)
	}
	if got := globalBatches(t, src, cfgOf(2, dropLast), 2, 0, 0); !slices.EqualFunc(got, ref, slices.Equal) {
		t.Errorf("DropLast at world 2: %v, want %v", got, ref)
	}

	// Micro-batches: a rank resumed mid-batch continues with its next micro-batch.
	micro := func(c *Config) { c.MicroBatches = 2 }
	ld := newLoader(t, src, cfgOf(2, micro)(1))
	var whole [][]int64
	var cursors []int
	for b, err := range ld.Epoch(context.Background(), 3) {
		if err != nil {
			t.Fatal(err)
		}
		whole, cursors = append(whole, slices.Clone(b.Indices)), append(cursors, b.Cursor)
		b.Release()
	}
	if len(whole) != 8 || cursors[2] != 24 || cursors[7] != 60 {
		t.Fatalf("%d micro-batches with cursors %v, want 8 reaching 24 after the third and 60 at the end", len(whole), cursors)
	}
	var rest [][]int64
	for b, err := range ld.EpochFrom(context.Background(), 3, cursors[2]) {
		if err != nil {
			t.Fatal(err)
		}
		rest = append(rest, slices.Clone(b.Indices))
		b.Release()
	}
	if !slices.EqualFunc(rest, whole[3:], slices.Equal) {
		t.Errorf("resumed at global cursor %d: %v, want %v", cursors[2], rest, whole[3:])
	}
}

// ShardOrder over a source that declares no shards says so once: each sample is its
// own shard, which is seldom what was meant (a Converted rather than its ByShard).
func TestShardOrderLogsUnshardedSource(t *testing.T) {
	sharded := shardedTree(t)
	for _, c := range []struct {
		src  Source
		logs int
	}{{sharded.FileSource, 1}, {sharded, 0}} {
		var logs []string
		cfg := orderConfig(4, 0, 1, 1)
		cfg.Logf = func(f string, a ...any) {
			if s := fmt.Sprintf(f, a...); strings.Contains(s, "not a ShardedSource") {
				logs = append(logs, s)
			}
		}
		ld := newLoader(t, c.src, cfg)
		ld.Close()
		if len(logs) != c.logs {
			t.Errorf("%v: logs %q, want %d", c.src, logs, c.logs)
		}
	}
}

// A cursor taken with one global batch and given with another: on a boundary of the new
// global batch it consumed the same samples of every partition (cursor/Partitions each),
// so the resumed epoch holds exactly the samples the old run had not delivered; off one,
// it is refused naming the cursor and the batch.
func TestShardOrderResumeWithAnotherGlobalBatch(t *testing.T) {
	src := shardedTree(t)
	const parts, epoch = 4, 1
	old := slices.Concat(globalBatches(t, src, func(int) *Config { return orderConfig(8, 0, 1, parts) }, 1, epoch, 0)...)
	const cursor = 24 // after 3 global batches of 8
	resumed := slices.Concat(globalBatches(t, src, func(int) *Config { return orderConfig(12, 0, 1, parts) }, 1, epoch, cursor)...)
	done, rest := slices.Clone(old[:cursor]), slices.Clone(old[cursor:])
	slices.Sort(rest)
	slices.Sort(resumed)
	if !slices.Equal(resumed, rest) {
		t.Errorf("resumed with batch 12 at %d: %v, want the samples batch 8 had not delivered %v (delivered %v)", cursor, resumed, rest, done)
	}

	ld := newLoader(t, src, orderConfig(12, 0, 1, parts))
	for _, err := range ld.EpochFrom(context.Background(), epoch, 16) {
		if err == nil || !strings.Contains(err.Error(), "global cursor 16") || !strings.Contains(err.Error(), "batches of 12 samples") {
			t.Errorf("cursor 16 with global batch 12: %v, want it refused naming both", err)
		}
		break
	}
}

// sampler.near picks a sample of the same partition's sequence, d places on (clamped to
// it), the same at every world size; and it is a sample read with the bad one, from the
// shards around it.
func TestSamplerNear(t *testing.T) {
	const parts, global, block = 8, 64, 100
	for _, tc := range []struct {
		n          int
		dropUneven bool
	}{{1000, false}, {1003, false}, {1003, true}} {
		ends := randomEnds(tc.n, 20, 40, 3)
		ref := shardSampler(tc.n, ends, parts, block, global, 0, 1, 9)
		ref.dropUneven = tc.dropUneven
		refOrder := ref.order(2, nil)
		shardOf := func(i int32) int { return sort.SearchInts(ends, int(i)+1) }
		for _, w := range []int{1, 2, 4, 8} {
			for r := range w {
				s := shardSampler(tc.n, ends, parts, block, global/w, r, w, 9)
				s.dropUneven = tc.dropUneven
				o := s.order(2, nil)
				for x := range o {
					for _, d := range []int{-1000, -37, -1, 1, 2, 50, 1000} {
						got := o[s.near(x, d)]
						want := refOrder[ref.near(s.global(x), d)]
						if got != want {
							t.Fatalf("n=%d world %d rank %d: near(%d, %d) holds %d, world 1's %d", tc.n, w, r, x, d, got, want)
						}
					}
				}
				// Within a global batch a partition's samples are consecutive: one on is
				// the next position, one back the previous.
				per := s.perPart()
				for x := range o {
					b := x / s.batch
					ps := min(per, s.partLen()-b*per)
					if off := (x - b*s.batch) % ps; off < ps-1 && s.near(x, 1) != x+1 || off > 0 && s.near(x, -1) != x-1 {
						t.Fatalf("n=%d world %d rank %d: near(%d, ±1) = %d, %d", tc.n, w, r, x, s.near(x, 1), s.near(x, -1))
					}
				}
				// The samples within half a block of x come from the few shards its
				// partition reads then (shards of 20 to 40 samples, blocks of 100), not
				// from all over the dataset.
				for x := 0; x < len(o); x += 17 {
					shards := map[int]bool{}
					for d := -block / 2; d <= block/2; d++ {
						shards[shardOf(o[s.near(x, d)])] = true
					}
					if len(shards) > 2*block/20+2 {
						t.Fatalf("n=%d world %d rank %d: the samples near position %d come from %d shards", tc.n, w, r, x, len(shards))
					}
				}
			}
		}
	}
}
