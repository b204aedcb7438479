package source

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/conveyor-ml/conveyor/pipeline"
)

// ByShard is the dataset's samples in storage order — shard file by shard file, each
// shard's records in the order they were written — as a ShardedSource, for
// Config.Order ShardOrder: a rank then reads a few shard files at a time instead of
// records scattered over all of them. The Converted itself lists samples in path order,
// which a conversion's concurrent workers store in no particular shard, so it declares
// no shards. Batch.Indices of a loader over ByShard are positions in this order;
// Path(i) and Label(i) name the sample.
//
// A conversion stores an ImageFolder in about path order, so consecutive shards hold
// few classes: with ShardOrder, ShuffleBlock must span many shards for a batch to mix
// classes, and its default over ByShard is at least 262,144 samples (byShardBlock)
// rather than four mean shards. A Concat or Subset of ByShard keeps the shards but not
// that default: set ShuffleBlock. Over a dataset in object storage (Open) the
// default is also kept small enough for the shards a block reads at once to fit half
// the shard cache; a larger block would fetch shards more than once.
func (s *Converted) ByShard() pipeline.ShardedSource {
	// Ref.Shard builds its name: build each once, not on every comparison.
	idx := make([]int32, len(s.refs))
	shard := make([]string, len(s.refs))
	for i, r := range s.refs {
		idx[i], shard[i] = int32(i), r.Shard()
	}
	slices.SortStableFunc(idx, func(a, b int32) int {
		return cmp.Or(cmp.Compare(shard[a], shard[b]), cmp.Compare(s.refs[a].Offset(), s.refs[b].Offset()))
	})
	var ends []int
	for k := 1; k <= len(idx); k++ {
		if k == len(idx) || shard[idx[k]] != shard[idx[k-1]] {
			ends = append(ends, k)
		}
	}
	v := &view{parts: []pipeline.Source{s}, ends: []int{len(s.refs)}, idx: idx, classes: s.classes,
		desc: fmt.Sprintf("%s by shard (%d shards)", s.cache.Dir(), len(ends))}
	v.describe()
	return &shardedView{view: v, shardEnds: ends, block: s.remoteBlock(len(ends))}
}

// remoteBlock is the least default ShuffleBlock over ByShard: byShardBlock, or for a
// dataset in object storage at most what keeps the shards read at once, and those
// fetched ahead, within half the shard cache's limit (so that no shard is evicted
// before its last read and fetched again).
func (s *Converted) remoteBlock(shards int) int {
	if s.planner == nil || shards == 0 {
		return byShardBlock
	}
	var total int64
	for _, m := range s.info.Shards {
		total += m.Bytes
	}
	meanBytes := max(total/int64(max(len(s.info.Shards), 1)), 1)
	fit := s.planner.limit/2/meanBytes - int64(s.planner.ahead) - 1 // a block straddles one more shard
	return int(min(int64(byShardBlock), max(fit, 1)*int64(len(s.refs)/shards)))
}

// byShardBlock is the least default Config.ShuffleBlock over ByShard. A conversion
// stores an ImageFolder in about path order, so its shards are sorted by class: four
// mean shards (of 1 GiB, some 10,000 samples at 256 px) would give each partition's block
// a few dozen classes, and a batch few classes (DESIGN, "Randomness and its limits").
// MosaicML Streaming's default shuffle_block_size is at least 1<<18 samples for the same
// reason; the shards are local files, so more of them at hand costs page cache, not
// downloads.
const byShardBlock = 1 << 18
