package pipeline

import (
	"fmt"
	"math/rand/v2"

	"github.com/conveyor-ml/conveyor/internal/seed"
)

// Order chooses how an epoch's samples are ordered and split among ranks (Config.Order.Mode).
type Order int

const (
	// SampleOrder permutes all samples, seeded by (Seed, epoch), and deals the
	// permutation to ranks as torch.utils.data.DistributedSampler does: rank r takes
	// positions r, r+World, r+2·World, ... Every rank reads from anywhere in the dataset,
	// which suits local files and a page cache, not shards fetched from object storage.
	SampleOrder Order = iota
	// ShardOrder is the shard-aware, elastic order: each epoch the source's shards
	// (ShardedSource; one sample each for a source without shards) are reshuffled and
	// their samples cut into Config.Order.Partitions canonical partitions of equal length;
	// within each partition samples are shuffled in blocks of Config.Order.ShuffleBlock; every
	// global batch (BatchSize × World samples) takes the same number of consecutive
	// samples from each partition, and rank r reads only partitions
	// [r·P/World, (r+1)·P/World). The order is a function of (Seed, epoch, Partitions)
	// alone, so a global batch holds the same samples at every World dividing
	// Partitions, and Batch.Cursor counts positions of that global order, with which
	// EpochFrom resumes at another World. docs/DESIGN.md describes the algorithm.
	ShardOrder
)

func (o Order) String() string {
	switch o {
	case SampleOrder:
		return "samples"
	case ShardOrder:
		return "shards"
	}
	return fmt.Sprintf("Order(%d)", int(o))
}

// Set sets o from its name, "samples" or "shards" (o is a flag.Value).
func (o *Order) Set(name string) error {
	for v := SampleOrder; v <= ShardOrder; v++ {
		if v.String() == name {
			*o = v
			return nil
		}
	}
	return fmt.Errorf("pipeline: unknown order %q (want samples or shards)", name)
}

// sampler decides this rank's sample order for an epoch. Nothing else decides order.
//
// With SampleOrder (parts == 0) sharding follows torch.utils.data.DistributedSampler: the
// global order (a permutation seeded by (seed, epoch), or index order when not
// shuffling) is made divisible by world either by repeating its first samples (the
// default, so every sample is seen at least once) or, with DropUneven, by dropping its
// tail; rank r then takes positions r, r+world, r+2*world, ... Every rank gets the same
// number of samples and, before padding, the shards are disjoint.
//
// With ShardOrder (parts > 0) the epoch is laid out in three steps, drawn from PCG
// streams seeded by (seed, epoch) for the shards and (seed, epoch, partition) for each
// partition's blocks, so every rank computes the same global order while materialising
// only its own partitions:
//
//  1. shuffle the shards (a Fisher–Yates permutation of shard numbers) and list their
//     samples shard after shard, each shard's in index order;
//  2. cut that list into parts partitions of equal length up to one sample, partition p
//     holding positions [p·n/parts, (p+1)·n/parts) — a shard may straddle two — and
//     shuffle each partition in consecutive blocks counted from the partition's start,
//     each of a size drawn uniformly from [block−⌊block/4⌋, block−⌊block/4⌋+2⌊block/4⌋],
//     so a block spans about block/shardLen+1 shards;
//  3. give every partition partLen samples (repeating its first samples when it is one
//     short, or dropping its last with DropUneven) and interleave: global batch b is
//     partition 0's samples [b·per, (b+1)·per), then partition 1's, ..., with
//     per = batch·world/parts (fewer in the last batch). Rank r's slice of every global
//     batch is the parts/world partitions starting at r·parts/world, which makes its
//     per-rank batch exactly BatchSize samples.
//
// Only step 3 looks at rank and world; steps 1 and 2 depend on (seed, epoch, parts) and
// the shard layout, so the global order does too and nothing else.
type sampler struct {
	n           int
	seed        uint64
	shuffle     bool
	rank, world int
	dropUneven  bool
	perm        []int32 // scratch reused across epochs

	// ShardOrder; parts == 0 means SampleOrder.
	parts  int     // canonical partitions
	ends   []int   // shard ends (ShardedSource); nil: every sample is a shard
	block  int     // samples shuffled together within a partition
	batch  int     // BatchSize: a rank's samples per global batch
	shards []int32 // scratch shard permutation
}

// partLen is the number of samples each partition contributes to an epoch.
func (s *sampler) partLen() int {
	if s.dropUneven {
		return s.n / s.parts
	}
	return (s.n + s.parts - 1) / s.parts
}

// shardLen is the number of samples each rank sees per epoch.
func (s *sampler) shardLen() int {
	if s.parts > 0 {
		return s.parts / s.world * s.partLen()
	}
	if s.dropUneven {
		return s.n / s.world
	}
	return (s.n + s.world - 1) / s.world
}

// bounds is partition p's range of positions in the shard-ordered list.
func (s *sampler) bounds(p int) (lo, hi int) {
	return p * s.n / s.parts, (p + 1) * s.n / s.parts
}

// perPart is how many samples each partition contributes to a whole global batch.
func (s *sampler) perPart() int { return s.batch * s.world / s.parts }

// global maps position x of this rank's epoch order to its position in the global
// order, the same for every world size: the coordinate that bad-sample replacements
// are drawn from, so they do not depend on the world size either. It is x itself with
// SampleOrder.
func (s *sampler) global(x int) int {
	if s.parts == 0 {
		return x
	}
	per, q := s.perPart(), s.parts/s.world
	b := x / s.batch
	ps := min(per, s.partLen()-b*per) // per-partition samples in this global batch
	y := x - b*s.batch
	p := s.rank*q + y/ps
	return b*per*s.parts + p*ps + y%ps
}

// near maps position x of this rank's ShardOrder epoch order to the position of the
// sample d places from it in its partition's sequence (clamped to that sequence): a
// sample read with it, from the same few shards. Partitions' sequences are the same at
// every world size, so near's choice is too.
func (s *sampler) near(x, d int) int {
	per, L := s.perPart(), s.partLen()
	b := x / s.batch // the global batch: all before the last are whole
	ps := min(per, L-b*per)
	y := x - b*s.batch
	pi, off := y/ps, b*per+y%ps
	off = min(max(off+d, 0), L-1)
	b = off / per
	ps = min(per, L-b*per)
	return b*s.batch + pi*ps + off%per
}

// order writes this rank's epoch order into dst (reusing it) and returns it.
func (s *sampler) order(epoch int, dst []int32) []int32 {
	if s.parts > 0 {
		return s.shardOrder(epoch, dst)
	}
	perm := s.scratch(s.n)
	for i := range perm {
		perm[i] = int32(i)
	}
	if s.shuffle {
		r := rand.New(rand.NewPCG(seed.Mix(s.seed, uint64(epoch)), 0x5eed5a3b1e))
		for i := len(perm) - 1; i > 0; i-- {
			j := r.IntN(i + 1)
			perm[i], perm[j] = perm[j], perm[i]
		}
	}
	m := s.shardLen()
	dst = dst[:0]
	for k := 0; k < m; k++ {
		p := s.rank + k*s.world // position in the padded global order
		dst = append(dst, perm[p%s.n])
	}
	return dst
}

// scratch returns s.perm resized to n, reallocated only to grow.
func (s *sampler) scratch(n int) []int32 {
	if cap(s.perm) < n {
		s.perm = make([]int32, n)
	}
	return s.perm[:n]
}

// Stream constants of ShardOrder's generators, distinct from SampleOrder's so that
// ShardOrder over one-sample shards is not SampleOrder's permutation by accident.
const (
	shardStream = 0x5eed5a3d0c
	blockStream = 0x5eed5a3d0b
)

// shardOrder is order for ShardOrder. It materialises only this rank's partitions — a
// World-th of the samples — unless the source has no shards, whose samples are shuffled
// as shards of one: that permutation is of all of them.
func (s *sampler) shardOrder(epoch int, dst []int32) []int32 {
	base := seed.Mix(s.seed, uint64(epoch))
	r := rand.New(rand.NewPCG(base, shardStream))
	q := s.parts / s.world
	first, _ := s.bounds(s.rank * q)
	_, last := s.bounds(s.rank*q + q - 1)
	// own holds positions [first, last) of the shard-ordered list: this rank's
	// partitions.
	var own []int32
	if s.ends == nil {
		// Step 1 with one-sample shards: a permutation of all samples.
		all := s.scratch(s.n)
		for i := range all {
			all[i] = int32(i)
		}
		if s.shuffle {
			shuffle32(r, all)
		}
		own = all[first:last]
	} else {
		// Step 1: shards in a shuffled order, each shard's samples in index order; keep
		// the stretch that falls in [first, last).
		if cap(s.shards) < len(s.ends) {
			s.shards = make([]int32, len(s.ends))
		}
		sh := s.shards[:len(s.ends)]
		for k := range sh {
			sh[k] = int32(k)
		}
		if s.shuffle {
			shuffle32(r, sh)
		}
		own = s.scratch(last - first)
		at := 0 // position of shard k's first sample in the shard-ordered list
		for _, k := range sh {
			lo := 0
			if k > 0 {
				lo = s.ends[k-1]
			}
			end := at + s.ends[k] - lo
			for pos := max(at, first); pos < min(end, last); pos++ {
				own[pos-first] = int32(lo + pos - at)
			}
			if at = end; at >= last {
				break
			}
		}
	}
	// Step 2: shuffle each partition within blocks counted from its start, of sizes drawn
	// around block (as MosaicML's py1br does) so that partitions, which advance in
	// lockstep, do not all start new blocks, and so need new shards, at the same batch.
	// Each partition has a stream of its own: a rank draws only its partitions' blocks.
	if s.shuffle && s.block > 1 {
		lo4, spread := s.block-s.block/4, s.block/4*2
		for p := s.rank * q; p < (s.rank+1)*q; p++ {
			rp := rand.New(rand.NewPCG(seed.Mix(base, uint64(p)), blockStream))
			lo, hi := s.bounds(p)
			part := own[lo-first : hi-first]
			for b := 0; b < len(part); {
				e := min(b+lo4+rp.IntN(spread+1), len(part))
				shuffle32(rp, part[b:e])
				b = e
			}
		}
	}
	// Step 3: this rank's partitions, global batch by global batch.
	L, per := s.partLen(), s.perPart()
	dst = dst[:0]
	for b0 := 0; b0 < L; b0 += per {
		ps := min(per, L-b0)
		for p := s.rank * q; p < (s.rank+1)*q; p++ {
			lo, hi := s.bounds(p)
			part := own[lo-first : hi-first]
			for off := b0; off < b0+ps; off++ {
				// A partition one sample short repeats its first sample.
				dst = append(dst, part[off%len(part)])
			}
		}
	}
	return dst
}

// shuffle32 is a Fisher–Yates shuffle of a.
func shuffle32(r *rand.Rand, a []int32) {
	for i := len(a) - 1; i > 0; i-- {
		j := r.IntN(i + 1)
		a[i], a[j] = a[j], a[i]
	}
}

// shardEnds returns src's shard ends when it is a ShardedSource, checked; nil when it is
// not (every sample is then a shard of its own).
func shardEnds(src Source) ([]int, error) {
	ss, ok := src.(ShardedSource)
	if !ok {
		return nil, nil
	}
	ends := ss.ShardEnds()
	if len(ends) == 0 {
		return nil, fmt.Errorf("pipeline: source %v lists no shards (ShardEnds is empty)", src)
	}
	prev := 0
	for k, e := range ends {
		if e < prev {
			return nil, fmt.Errorf("pipeline: source %v: shard %d ends at sample %d, before shard %d's end %d; ShardEnds must not decrease", src, k, e, k-1, prev)
		}
		prev = e
	}
	if prev != src.Len() {
		return nil, fmt.Errorf("pipeline: source %v: its shards end at sample %d but it has %d samples", src, prev, src.Len())
	}
	return ends, nil
}
