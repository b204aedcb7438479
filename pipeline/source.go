package pipeline

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/conveyor-ml/conveyor/cache"
)

// Source is an indexed dataset: Len samples, each with a class label and a name. What a
// sample's bytes are is a capability the loader asks for through interfaces, never
// concrete types:
//
//   - FileSource: encoded image files (ImageFolder, Dir, Manifest, over any io/fs.FS),
//     which the loader reads, decodes and resizes first;
//   - PixelSource: pixels stored already decoded and resized (OpenConverted), which the
//     loader reads and unpacks.
//
// A Source must implement at least one of them. Subset, Concat and Split compose sources
// of either kind, and their results implement both, asking the source a sample comes
// from. Implementations must be safe for concurrent use.
type Source interface {
	// Len is the number of samples.
	Len() int
	// Label is sample i's class label, an index into Classes.
	Label(i int) int
	// Path names sample i in messages and cache keys (relative to the source's root).
	Path(i int) string
	// Classes are the class names, index = label.
	Classes() []string
}

// FileSource is a Source of encoded image files.
type FileSource interface {
	Source
	// Open opens sample i's encoded bytes. The loader calls Stat on the result to learn
	// the size before it reserves memory, then reads it whole.
	Open(i int) (fs.File, error)
}

// PixelSource is a Source of stored pixels: records that conveyor convert (or a loader's
// cache) wrote, already decoded and resized first.
type PixelSource interface {
	Source
	// Stored returns the record holding sample i's pixels and the cache it is in; ok is
	// false when sample i is not stored pixels (in a Concat of both kinds), and the loader
	// opens it as a file instead.
	Stored(i int) (c *cache.Cache, ref cache.Ref, ok bool)
}

// ShardedSource is a Source stored in shards: shard k holds the sample indices [ends[k-1], ends[k]) (ends[-1] = 0).
//
// It is a capability, like FileSource: a source whose samples are read a shard at a time
// (a converted dataset's shard files, WebDataset tar shards in object storage) says where
// its shards are, and Config.Order.Mode ShardOrder keeps each rank within a few shards at a
// time. ShardEnds is called once, by New; it must be non-decreasing, start at or above 0
// and end at Len() (an empty shard repeats its predecessor's end). Concat and Subset
// views of a ShardedSource are ShardedSources too.
type ShardedSource interface {
	Source
	ShardEnds() []int
	// ShuffleBlock is the least default Config.Order.ShuffleBlock the source asks for under
	// ShardOrder, where four mean shards would mix too few classes; 0 asks for none.
	ShuffleBlock() int
}

// An EpochPlanner is a Source that wants to know, before an epoch's first read, which
// samples this rank will read and in what order, so it can bring remote data close
// ahead of need: the WebDataset source turns the plan into shard prefetches in
// first-use order.
//
// As an epoch starts, the loader calls PlanEpoch with its number and the source indices
// this rank reads, in order, from the cursor; right after (once its first batch is
// dispatched) it calls PlanNext with the next epoch's order from its start, so the
// source's look-ahead can run on into the next epoch while this one ends. When that
// epoch starts, PlanEpoch gets the same order again: the source should carry on with
// what it asked for under PlanNext. order is the loader's buffer: neither method may
// keep it, and both must return quickly. A plan is a hint: replacements for bad samples
// read out of plan, the look-ahead past the last epoch is never read, and reads stay
// correct if the plan is ignored. Views (Subset, Concat, Split, Converted.ByShard) are
// EpochPlanners that give each part that plans the plan of its own samples.
//
// PlanEpoch may refuse the epoch with an error, which the epoch returns before its first
// batch: a source whose cache cannot hold what the epoch reads at once, say.
type EpochPlanner interface {
	Source
	// PlansReads reports whether the source wants plans at all: a type that can plan may
	// have nothing to plan (a local converted dataset, local WebDataset shards, a view
	// of sources that do not plan), and the loader then computes none.
	PlansReads() bool
	PlanEpoch(epoch int, order []int32) error
	PlanNext(epoch int, order []int32)
}

// checkKind reports a source that is neither a FileSource nor a PixelSource.
func checkKind(src Source) error {
	if src == nil {
		return errors.New("pipeline: nil source")
	}
	_, files := src.(FileSource)
	_, pixels := src.(PixelSource)
	if !files && !pixels {
		return fmt.Errorf("pipeline: source %T has neither files (FileSource: Open) nor stored pixels (PixelSource: Stored); a type wrapping a source must embed one of those interfaces, not Source", src)
	}
	// A source written for the capabilities' earlier forms would lose them without a
	// word (a ShardOrder of one-sample shards, no prefetching): say what it lacks.
	if _, ok := src.(interface{ ShardEnds() []int }); ok {
		if _, ok := src.(ShardedSource); !ok {
			return fmt.Errorf("pipeline: source %T has ShardEnds but not ShuffleBlock() int, so it is no ShardedSource; add ShuffleBlock (0 asks for no least shuffle block)", src)
		}
	}
	if _, ok := src.(interface{ PlanEpoch(int, []int32) }); ok {
		return fmt.Errorf("pipeline: source %T has PlanEpoch without an error result, so it is no EpochPlanner; EpochPlanner's PlanEpoch returns an error (nil to accept the epoch) and it needs PlansReads() bool", src)
	}
	if _, ok := src.(interface{ PlanNext(int, []int32) }); ok {
		if _, ok := src.(EpochPlanner); !ok {
			return fmt.Errorf("pipeline: source %T has PlanNext but is no EpochPlanner; it needs PlansReads() bool and PlanEpoch(int, []int32) error", src)
		}
	}
	return nil
}
