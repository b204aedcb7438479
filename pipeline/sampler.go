package pipeline

import (
	"math/rand/v2"

	"github.com/conveyor-ml/conveyor/internal/seed"
)

// sampler decides this rank's sample order for an epoch. Nothing else decides order.
//
// Sharding follows torch.utils.data.DistributedSampler: the global order (a permutation
// seeded by (seed, epoch), or index order when not shuffling) is made divisible by world
// either by repeating its first samples (the default, so every sample is seen at least
// once) or, with DropUneven, by dropping its tail; rank r then takes positions
// r, r+world, r+2*world, ... Every rank gets the same number of samples and, before
// padding, the shards are disjoint.
type sampler struct {
	n           int
	seed        uint64
	shuffle     bool
	rank, world int
	dropUneven  bool
	perm        []int32 // scratch reused across epochs
}

// shardLen is the number of samples each rank sees per epoch.
func (s *sampler) shardLen() int {
	if s.dropUneven {
		return s.n / s.world
	}
	return (s.n + s.world - 1) / s.world
}

// order writes this rank's epoch order into dst (reusing it) and returns it.
func (s *sampler) order(epoch int, dst []int32) []int32 {
	if cap(s.perm) < s.n {
		s.perm = make([]int32, s.n)
	}
	perm := s.perm[:s.n]
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
