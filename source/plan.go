package source

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/conveyor-ml/conveyor/objstore"
)

// shardPrefetcher is the capability of a file system that fetches shards ahead of need
// (objstore's Cache).
type shardPrefetcher interface {
	Prefetch(names ...string)
}

// planned is what a sharded source embeds to implement pipeline.EpochPlanner: it
// forwards the loader's epoch plans to the source's shardPlanner, when the source's
// shards are read through a file system that prefetches (objstore's shard cache), and
// does nothing otherwise.
type planned struct {
	planner *shardPlanner // nil: the shards are not prefetched
}

// PlanEpoch implements pipeline.EpochPlanner: when the shards are read through a shard
// cache that prefetches (a dataset in object storage, opened by Open), it asks for the
// epoch's shards in the order their first samples come, a window ahead of the shards
// being read (WebDatasetOptions.PrefetchShards, ConvertedOptions.PrefetchShards), so
// the cache fetches each before it is needed without filling its disk with shards
// needed much later (which would push out the shards being read). Shards read stay in
// the cache until its least-recently-used eviction needs their room. Otherwise it does
// nothing.
func (p *planned) PlanEpoch(epoch int, order []int32) error {
	if p.planner != nil {
		return p.planner.PlanEpoch(epoch, order)
	}
	return nil
}

// PlanNext implements pipeline.EpochPlanner: the window runs on into the next epoch's
// first shards as this one's last are read.
func (p *planned) PlanNext(epoch int, order []int32) {
	if p.planner != nil {
		p.planner.PlanNext(epoch, order)
	}
}

// PlansReads reports whether the shards are read through a file system that prefetches.
func (p *planned) PlansReads() bool { return p.planner != nil }

// opening tells the planner, if any, that sample i is being opened: before the read
// waits for its shard.
func (p *planned) opening(i int) {
	if p.planner != nil {
		p.planner.opened(i)
	}
}

// shardPlanner turns the loader's epoch plans (EpochPlanner) into prefetches of a sharded
// source's shards: in the order the epoch first reads them, a window at a time.
//
// The window is ahead shards past those the order reads at once. An epoch's order reads
// some shards together (with ShardOrder, a shuffle block's: ShuffleBlock/shard length+1;
// with SampleOrder, all of them), and when it moves on it opens the next such group at
// once; so the window reaches past the furthest shard opened by that group's size plus
// ahead: the next group is asked for while the current one is read, and ahead more
// shards give its fetches slack. Asking for shards much further ahead would fill the
// cache with shards needed late and push out those being read.
//
// The look-ahead runs on across epochs: the loader gives the next epoch's plan as an
// epoch begins (PlanNext), and when the current plan's window passes its last shard the
// rest of the window is asked for from the next plan, so the next epoch's first shards
// arrive while this one ends. When that epoch starts (PlanEpoch with the same order) the
// next plan becomes the current one, keeping what it has asked for.
type shardPlanner struct {
	pf    shardPrefetcher
	names []string // per shard, the name the prefetcher knows it by
	ends  []int    // ShardEnds, for shards of consecutive samples; or nil and of
	of    []int32  // per sample, its shard
	total int      // samples
	ahead int
	// sizes, when known, are the shards' bytes, and limit the prefetcher's: the window
	// is kept within the room the shards being read leave, and an epoch reading more
	// bytes at once than the limit (or leaving too little room) is logged, once, to logf.
	sizes        []int64
	limit        int64
	logf         func(format string, args ...any)
	warnedOver   atomic.Bool
	warnedWindow atomic.Bool
	desc         string // names the source in those messages

	mu   sync.Mutex                // serialises PlanEpoch and PlanNext
	cur  atomic.Pointer[shardPlan] // the epoch being read
	next atomic.Pointer[shardPlan] // the one after it, once known
}

// shardPlan is one epoch's shards in first-use order, asked for a window at a time.
type shardPlan struct {
	epoch  int
	first  []int32 // shards in first-use order
	pos    []int32 // per shard, its place in first; -1 when the epoch does not read it
	window int32   // ahead + the most shards the order reads at once
	issued atomic.Int32
	// overflow is how far past the end of first the window has reached (the places of
	// the next plan to ask for), so a next plan given late catches up.
	overflow atomic.Int32
	// left counts, per shard, its samples in the order not yet opened: at 0 the shard is
	// done with for the epoch and released, so that the cache makes room with it rather
	// than with a shard still being read (idle between its records' reads, least
	// recently used, and otherwise evicted to be fetched again).
	left []atomic.Int32
	// err, when not nil, refuses the epoch: it reads more bytes at once than the cache
	// holds, so shards would be fetched again and again.
	err error
}

// bound gives p the shards' sizes (0: unknown) and, when fsys is a shard cache with a
// byte limit (objstore.ShardCache), that limit, so that the window stays within the cache;
// logf and desc name the source in the notices build logs.
func (p *shardPlanner) bound(fsys any, sizes []int64, logf func(string, ...any), desc string) {
	p.sizes, p.logf, p.desc = sizes, logf, desc
	if c, ok := fsys.(interface {
		Options() objstore.ShardCacheOptions
	}); ok {
		p.limit = c.Options().MaxBytes
	}
}

// newShardPlanner returns a planner for shards of the given names and ends, or nil when
// fsys does not prefetch (then there is nothing to plan).
func newShardPlanner(fsys any, names []string, ends []int, ahead int) *shardPlanner {
	pf, ok := fsys.(shardPrefetcher)
	if !ok {
		return nil
	}
	total := 0
	if len(ends) > 0 {
		total = ends[len(ends)-1]
	}
	return &shardPlanner{pf: pf, names: names, ends: ends, total: total, ahead: ahead}
}

// newScatteredPlanner is newShardPlanner for a source whose shards' samples are not
// consecutive: of[i] is sample i's shard.
func newScatteredPlanner(fsys any, names []string, of []int32, ahead int) *shardPlanner {
	pf, ok := fsys.(shardPrefetcher)
	if !ok {
		return nil
	}
	return &shardPlanner{pf: pf, names: names, of: of, total: len(of), ahead: ahead}
}

// shardOf returns the shard holding sample i.
func (p *shardPlanner) shardOf(i int) int {
	if p.of != nil {
		return int(p.of[i])
	}
	return sort.SearchInts(p.ends, i+1)
}

// build makes the plan of an epoch reading order.
func (p *shardPlanner) build(epoch int, order []int32) *shardPlan {
	n := len(p.names)
	pl := &shardPlan{epoch: epoch, pos: make([]int32, n), left: make([]atomic.Int32, n)}
	last := make([]int32, n) // per shard, the place in order of its last sample
	for k := range pl.pos {
		pl.pos[k] = -1
	}
	firstAt := make([]int32, 0, n) // per place in first, the place in order of its first sample
	k := 0
	for at, i := range order {
		if i < 0 || int(i) >= p.total {
			continue
		}
		switch {
		case p.of != nil:
			k = int(p.of[i])
		case !(int(i) < p.ends[k] && (k == 0 || int(i) >= p.ends[k-1])):
			k = p.shardOf(int(i))
		}
		pl.left[k].Add(1)
		if pl.pos[k] < 0 {
			pl.pos[k] = int32(len(pl.first))
			pl.first = append(pl.first, int32(k))
			firstAt = append(firstAt, int32(at))
		}
		last[k] = int32(at)
	}
	// The most shards read at once: a sweep over the shards' spans [first, last] in
	// the order, each span opening at its first sample and closing after its last; with
	// sizes, the most bytes too.
	type event struct {
		at, d int32
		b     int64
	}
	ev := make([]event, 0, 2*len(pl.first))
	for j, k := range pl.first {
		var b int64
		if p.sizes != nil {
			b = p.sizes[k]
		}
		ev = append(ev, event{firstAt[j], 1, b}, event{last[k] + 1, -1, -b})
	}
	slices.SortFunc(ev, func(a, b event) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.d, b.d) // closings first
	})
	var open, most int32
	var openBytes, mostBytes int64
	for _, e := range ev {
		open += e.d
		openBytes += e.b
		most = max(most, open)
		mostBytes = max(mostBytes, openBytes)
	}
	pl.window = int32(p.ahead) + most
	if p.limit <= 0 || p.sizes == nil {
		return pl
	}
	// With sizes and the cache's limit known, the window is also kept within the room
	// the shards being read leave: a shard fetched ahead beyond it would evict one
	// still being read, to be fetched again.
	var largest int64
	for _, k := range pl.first {
		largest = max(largest, p.sizes[k])
	}
	if mostBytes > p.limit {
		pl.window = 0
		pl.err = fmt.Errorf("source: %s: epoch %d reads up to %d shards (%d bytes) at once, more than the shard cache's limit of %d bytes, so each would be fetched again and again: read it in shard order (Config.Order ShardOrder, a converted dataset through Converted.ByShard; conveyor bench --order shards) with a ShuffleBlock small enough, or raise the limit to at least %d bytes (OpenOptions.Cache.MaxBytes, --shard-cache-max-bytes)",
			p.desc, epoch, most, mostBytes, p.limit, mostBytes)
		return pl
	}
	// No shard ahead when there is no room for one: fetched ahead, it would evict one
	// still being read.
	if room := int32((p.limit - mostBytes) / max(largest, 1)); room < pl.window {
		pl.window = max(room, 0)
		if p.logf != nil && p.warnedWindow.CompareAndSwap(false, true) {
			p.logf("source: %s: epoch %d reads up to %d shards (%d bytes) at once, and the shard cache's limit of %d bytes leaves room for %d shards ahead of them, not the %d that would have the next ones fetched before they are read; a limit of about %d bytes would",
				p.desc, epoch, most, mostBytes, p.limit, pl.window, int32(p.ahead)+most, mostBytes+int64(int32(p.ahead)+most)*largest)
		}
	}
	return pl
}

// PlanEpoch starts epoch's plan: the order it reads from now. If it is the next plan
// given earlier (the same shards in the same first-use order), that one goes on. It
// returns the plan's refusal (see shardPlan.err), if any.
func (p *shardPlanner) PlanEpoch(epoch int, order []int32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	pl := p.build(epoch, order)
	if nx := p.next.Load(); nx != nil && nx.epoch == epoch && slices.Equal(nx.first, pl.first) {
		pl = nx
	}
	p.next.Store(nil)
	p.cur.Store(pl)
	p.advance(pl, -1)
	return pl.err
}

// PlanNext gives the plan of the epoch after the current one, from its start. It asks
// for nothing until the current plan's window passes its end (at once if it has).
func (p *shardPlanner) PlanNext(epoch int, order []int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	nx := p.build(epoch, order)
	p.next.Store(nx)
	if cur := p.cur.Load(); cur != nil {
		if o := cur.overflow.Load(); o > 0 {
			p.issue(nx, o)
		}
	}
}

// opened is called before sample i is opened: reads in plan order move the window to
// the window's length past the sample's shard. A shard the plan has not asked for yet (a
// replacement for a bad sample, read out of order) does not move it.
func (p *shardPlanner) opened(i int) {
	pl := p.cur.Load()
	if pl == nil || i < 0 || i >= p.total {
		return
	}
	k := p.shardOf(i)
	if j := pl.pos[k]; j >= 0 && j < pl.issued.Load() {
		p.advance(pl, j)
	}
	if pl.left[k].Add(-1) == 0 {
		// Its last sample of the epoch is about to be read: once read, the shard is the
		// first the cache evicts, rather than one still being read (idle between its
		// records' reads and least recently used). Unless the next epoch has asked for
		// it already.
		if nx := p.next.Load(); nx == nil || nx.pos[k] < 0 || nx.pos[k] >= nx.issued.Load() {
			if d, ok := p.pf.(interface{ Done(...string) }); ok {
				d.Done(p.names[k])
			}
		}
	}
}

// advance asks for pl's shards up to its window past place j, running on into the next
// plan past its end.
func (p *shardPlanner) advance(pl *shardPlan, j int32) {
	want := j + 1 + pl.window
	if over := want - int32(len(pl.first)); over > 0 {
		for {
			o := pl.overflow.Load()
			if o >= over || pl.overflow.CompareAndSwap(o, over) {
				break
			}
		}
		if nx := p.next.Load(); nx != nil {
			p.issue(nx, over)
		}
	}
	p.issue(pl, want)
}

// issue asks for pl's shards up to place want (exclusive), those not asked for yet.
func (p *shardPlanner) issue(pl *shardPlan, want int32) {
	want = min(want, int32(len(pl.first)))
	for {
		from := pl.issued.Load()
		if from >= want {
			return
		}
		if pl.issued.CompareAndSwap(from, want) {
			names := make([]string, 0, want-from)
			for _, k := range pl.first[from:want] {
				names = append(names, p.names[k])
			}
			p.pf.Prefetch(names...)
			return
		}
	}
}
