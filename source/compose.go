package source

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/conveyor-ml/conveyor/cache"
	mix "github.com/conveyor-ml/conveyor/internal/seed"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// view is a source made of other sources' samples: Subset, Concat and Split are views.
// It implements FileSource and PixelSource both, asking the source a sample comes from,
// so it composes sources of either kind and a mix of them.
type view struct {
	parts   []pipeline.Source
	ends    []int   // ends[p] is the end of part p in the view, without idx
	idx     []int32 // the view's samples as indices into the concatenation of parts; nil: all of them
	classes []string
	desc    string
	multi   bool     // some part is multi-label
	keys    []string // the parts' metadata keys, in order of first appearance
}

// describe sets what v passes through from its parts: multi-label and metadata keys.
func (v *view) describe() {
	seen := map[string]bool{}
	for _, s := range v.parts {
		v.multi = v.multi || isMultiLabel(s)
		if m, ok := s.(pipeline.MetadataSource); ok {
			for _, k := range m.MetadataKeys() {
				if !seen[k] {
					seen[k] = true
					v.keys = append(v.keys, k)
				}
			}
		}
	}
}

// MultiLabel reports whether a source the view draws from is multi-label.
func (v *view) MultiLabel() bool { return v.multi }

// Labels appends sample i's labels, asking its source.
func (v *view) Labels(dst []int, i int) []int { s, j := v.at(i); return labelsOf(s, dst, j) }

// MetadataKeys lists the metadata keys of the view's sources, in order of first
// appearance.
func (v *view) MetadataKeys() []string { return v.keys }

// Metadata returns sample i's value under key, asking its source.
func (v *view) Metadata(i int, key string) ([]byte, bool) {
	s, j := v.at(i)
	if m, ok := s.(pipeline.MetadataSource); ok {
		return m.Metadata(j, key)
	}
	return nil, false
}

func (v *view) Len() int {
	if v.idx != nil {
		return len(v.idx)
	}
	return v.ends[len(v.ends)-1]
}

// at maps sample i of the view to its part and its index there.
func (v *view) at(i int) (pipeline.Source, int) {
	if v.idx != nil {
		i = int(v.idx[i])
	}
	p := sort.SearchInts(v.ends, i+1)
	if p > 0 {
		i -= v.ends[p-1]
	}
	return v.parts[p], i
}

func (v *view) Label(i int) int   { s, j := v.at(i); return s.Label(j) }
func (v *view) Path(i int) string { s, j := v.at(i); return s.Path(j) }
func (v *view) Classes() []string { return v.classes }
func (v *view) String() string    { return v.desc }

// Open opens sample i when its source is a FileSource.
func (v *view) Open(i int) (fs.File, error) {
	s, j := v.at(i)
	f, ok := s.(pipeline.FileSource)
	if !ok {
		return nil, fmt.Errorf("source: %T holds no files", s)
	}
	return f.Open(j)
}

// Stored returns sample i's record when its source is a PixelSource that stores it.
func (v *view) Stored(i int) (*cache.Cache, cache.Ref, bool) {
	s, j := v.at(i)
	if p, ok := s.(pipeline.PixelSource); ok {
		return p.Stored(j)
	}
	return nil, cache.Ref{}, false
}

// PlansReads reports whether a part of the view plans its reads (EpochPlanner).
func (v *view) PlansReads() bool {
	return slices.ContainsFunc(v.parts, plansReads)
}

// PlanEpoch gives each part that plans its reads the part of order that is its own, as
// its indices (see EpochPlanner), and returns the first part's refusal.
func (v *view) PlanEpoch(epoch int, order []int32) error {
	var refused error
	v.plan(epoch, order, func(p pipeline.EpochPlanner, epoch int, own []int32) {
		if err := p.PlanEpoch(epoch, own); err != nil && refused == nil {
			refused = err
		}
	})
	return refused
}

// PlanNext gives each part that plans its reads the part of the next epoch's order that
// is its own.
func (v *view) PlanNext(epoch int, order []int32) {
	v.plan(epoch, order, pipeline.EpochPlanner.PlanNext)
}

func (v *view) plan(epoch int, order []int32, give func(pipeline.EpochPlanner, int, []int32)) {
	for p, part := range v.parts {
		pl, ok := part.(pipeline.EpochPlanner)
		if !ok || !pl.PlansReads() {
			continue
		}
		start := 0
		if p > 0 {
			start = v.ends[p-1]
		}
		end := v.ends[p]
		own := make([]int32, 0, min(len(order), end-start))
		n := v.Len()
		for _, i := range order {
			if i < 0 || int(i) >= n {
				continue
			}
			j := int(i)
			if v.idx != nil {
				j = int(v.idx[i])
			}
			if start <= j && j < end {
				own = append(own, int32(j-start))
			}
		}
		give(pl, epoch, own)
	}
}

// shardedView is a view of which some part is a ShardedSource: a ShardedSource itself.
type shardedView struct {
	*view
	shardEnds []int
	block     int // the default ShuffleBlock, when larger than four mean shards; 0: none
}

// ShuffleBlock is the least default Config.ShuffleBlock v asks for under ShardOrder.
func (v *shardedView) ShuffleBlock() int { return v.block }

// ShardEnds lists the view's shards: a Concat's are its parts' shards one after another
// (a part without shards has one shard per sample); a Subset's are its runs of
// consecutive samples from one shard of its source, so a Subset in index order (Split's
// halves) keeps its source's shards, and one in random order has shards of one sample.
func (v *shardedView) ShardEnds() []int { return v.shardEnds }

// withShards returns v as a ShardedSource when one of its parts is one, else v.
func (v *view) withShards() pipeline.Source {
	sharded := false
	for _, p := range v.parts {
		_, ok := p.(pipeline.ShardedSource)
		sharded = sharded || ok
	}
	if !sharded {
		return v
	}
	// shardOf numbers the shards of the parts' concatenation: sample i of the
	// concatenation lies in shard shardOf(i).
	var starts []int // first shard number of each part
	var partEnds [][]int
	next := 0
	for _, p := range v.parts {
		starts = append(starts, next)
		var ends []int
		if ss, ok := p.(pipeline.ShardedSource); ok {
			ends = ss.ShardEnds()
			next += len(ends)
		} else {
			next += p.Len()
		}
		partEnds = append(partEnds, ends)
	}
	shardOf := func(i int) int {
		k := sort.SearchInts(v.ends, i+1)
		if k > 0 {
			i -= v.ends[k-1]
		}
		if partEnds[k] == nil {
			return starts[k] + i
		}
		return starts[k] + sort.SearchInts(partEnds[k], i+1)
	}
	var ends []int
	n := v.Len()
	for i := range n {
		j := i
		if v.idx != nil {
			j = int(v.idx[i])
		}
		if i+1 == n {
			ends = append(ends, n)
			break
		}
		jn := i + 1
		if v.idx != nil {
			jn = int(v.idx[i+1])
		}
		if shardOf(j) != shardOf(jn) {
			ends = append(ends, i+1)
		}
	}
	return &shardedView{view: v, shardEnds: ends}
}

// Subset is the samples of src at indices, in that order (an index may repeat), with
// src's labels and classes. It has the kind of src: files, stored pixels, or both.
func Subset(src pipeline.Source, indices []int) (pipeline.Source, error) {
	if err := checkKind(src); err != nil {
		return nil, err
	}
	idx := make([]int32, len(indices))
	for k, i := range indices {
		if i < 0 || i >= src.Len() {
			return nil, fmt.Errorf("source: subset: index %d (position %d) outside the source's %d samples", i, k, src.Len())
		}
		idx[k] = int32(i)
	}
	if len(idx) == 0 {
		return nil, errors.New("source: subset: no indices")
	}
	v := &view{parts: []pipeline.Source{src}, ends: []int{src.Len()}, idx: idx, classes: src.Classes(), desc: fmt.Sprintf("subset(%v, %d samples)", src, len(idx))}
	v.describe()
	return v.withShards(), nil
}

// Concat is the samples of every source, one source after another. A label must mean the
// same class in each: every source's classes are the longest one's or a beginning of them
// (a validation folder without the last class, a manifest of integer labels whose largest
// is smaller). The sources may be of different kinds (image files and a converted
// dataset).
func Concat(srcs ...pipeline.Source) (pipeline.Source, error) {
	if len(srcs) == 0 {
		return nil, errors.New("source: concat: no sources")
	}
	longest := 0
	for k, s := range srcs {
		if err := checkKind(s); err != nil {
			return nil, fmt.Errorf("source: concat: source %d: %w", k, err)
		}
		if len(s.Classes()) > len(srcs[longest].Classes()) {
			longest = k
		}
	}
	v := &view{classes: srcs[longest].Classes(), desc: "concat("}
	n := 0
	for k, s := range srcs {
		if c := s.Classes(); !slices.Equal(c, v.classes[:len(c)]) {
			return nil, fmt.Errorf("source: concat: source %d (%v) has classes %s, source %d (%v) has %s; labels would mean different classes",
				k, s, abbrev(c), longest, srcs[longest], abbrev(v.classes))
		}
		n += s.Len()
		if n > math.MaxInt32 {
			return nil, fmt.Errorf("source: concat: more than %d samples", math.MaxInt32)
		}
		v.parts = append(v.parts, s)
		v.ends = append(v.ends, n)
		if k > 0 {
			v.desc += ", "
		}
		v.desc += fmt.Sprint(s)
	}
	v.desc += ")"
	v.describe()
	return v.withShards(), nil
}

// Split divides src into a training and a validation set: valFraction of every class's
// samples, drawn at random from seed, are validation samples, the rest are training
// samples (a stratified split, as scikit-learn's train_test_split with stratify; a
// multi-label sample counts under its smallest label, Label). Both
// keep src's index order, so a Sequential validation loader visits them in that order.
// The same seed gives the same split on every machine. Every class with at least two
// samples keeps at least one on each side.
func Split(src pipeline.Source, valFraction float64, seed uint64) (train, val pipeline.Source, err error) {
	if !(valFraction > 0 && valFraction < 1) {
		return nil, nil, fmt.Errorf("source: split: valFraction %g not in (0, 1)", valFraction)
	}
	if err := checkKind(src); err != nil {
		return nil, nil, err
	}
	byClass := map[int][]int{}
	for i := range src.Len() {
		l := src.Label(i)
		byClass[l] = append(byClass[l], i)
	}
	inVal := make([]bool, src.Len())
	for _, l := range slices.Sorted(maps.Keys(byClass)) {
		idx := byClass[l]
		k := int(math.Round(valFraction * float64(len(idx))))
		if len(idx) >= 2 {
			k = min(max(k, 1), len(idx)-1)
		}
		r := rand.New(rand.NewPCG(mix.Mix(seed, uint64(l)), 0x5b117))
		for _, j := range r.Perm(len(idx))[:k] {
			inVal[idx[j]] = true
		}
	}
	var ti, vi []int
	for i, v := range inVal {
		if v {
			vi = append(vi, i)
		} else {
			ti = append(ti, i)
		}
	}
	if len(ti) == 0 || len(vi) == 0 {
		return nil, nil, fmt.Errorf("source: split: %d samples with valFraction %g leave %d for training and %d for validation", src.Len(), valFraction, len(ti), len(vi))
	}
	if train, err = Subset(src, ti); err != nil {
		return nil, nil, err
	}
	if val, err = Subset(src, vi); err != nil {
		return nil, nil, err
	}
	return train, val, nil
}

// abbrev prints a class list, shortened when long.
func abbrev(c []string) string {
	if len(c) <= 6 {
		return fmt.Sprintf("%q", c)
	}
	return fmt.Sprintf("%q … (%d classes)", c[:6], len(c))
}

// plansReads reports whether src wants epoch plans.
func plansReads(src pipeline.Source) bool {
	p, ok := src.(pipeline.EpochPlanner)
	return ok && p.PlansReads()
}
