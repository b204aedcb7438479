package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/conveyor-ml/conveyor/internal/treetest"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// planFS is a file system that prefetches, as objstore's Cache does, and logs every
// Open, Prefetch and Release in the order they happen.
type planFS struct {
	fs.FS
	mu  sync.Mutex
	log []planEvent
}

type planEvent struct {
	op, name string
	names    []string // a prefetch's
}

func (p *planFS) add(op string, names ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if op == "prefetch" {
		p.log = append(p.log, planEvent{op: op, names: slices.Clone(names)})
		return
	}
	for _, n := range names {
		p.log = append(p.log, planEvent{op: op, name: n})
	}
}

func (p *planFS) Open(name string) (fs.File, error) {
	p.add("open", name)
	return p.FS.Open(name)
}
func (p *planFS) Prefetch(names ...string) { p.add("prefetch", names...) }
func (p *planFS) Release(names ...string)  { p.add("release", names...) }

func (p *planFS) take() []planEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.log
	p.log = nil
	return l
}

// mostAtOnce is the most shards an order of samples (shard k ends at ends[k]) reads at
// once: the largest number of shards whose spans, first sample to last, overlap.
func mostAtOnce(ends []int, order []int64) int {
	first, last := map[int]int{}, map[int]int{}
	for at, i := range order {
		k := sort.SearchInts(ends, int(i)+1)
		if _, ok := first[k]; !ok {
			first[k] = at
		}
		last[k] = at
	}
	most := 0
	for at := range order {
		n := 0
		for k, f := range first {
			if f <= at && at <= last[k] {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// The loader plans each epoch: the WebDataset source prefetches the epoch's shards in the
// order the rank first reads them, a window ahead of the reads (PrefetchShards past the
// shards read at once), and runs on into the next epoch's first shards as an epoch ends;
// a start at a cursor plans again.
func TestWebDatasetPlanEpoch(t *testing.T) {
	tree := wdsTree(t, 3, 20)
	folder, err := Dir(tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	sd := t.TempDir()
	shards := shardsOf(t, sd, folder, 3) // 20 shards
	pfs := &planFS{FS: os.DirFS(sd)}
	const ahead = 2
	wds, err := WebDataset(pfs, shards, &WebDatasetOptions{Classes: folder.Classes(), PrefetchShards: ahead, Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	pfs.take() // indexing
	for _, order := range []pipeline.Order{pipeline.ShardOrder, pipeline.SampleOrder} {
		for _, world := range []int{1, 2} {
			cfg := testConfig(2)
			cfg.Order.Mode, cfg.Order.World, cfg.Order.Rank, cfg.Order.Partitions = order, world, world-1, 2
			if order == pipeline.ShardOrder {
				cfg.Order.ShuffleBlock = 6 // two shards, three at once where a block straddles
			} else {
				cfg.Order.Partitions = 0
			}
			ld := newLoader(t, wds, cfg)
			var logs [][]planEvent
			var plans [][]string
			var windows []int
			for epoch := range 3 {
				d := collect(t, ld, context.Background(), epoch, 0)
				logs = append(logs, pfs.take())
				// First-use order of the shards in the samples delivered.
				var plan []string
				for _, i := range d.indices {
					k, _, _ := wds.at(int(i))
					if !slices.Contains(plan, shards[k]) {
						plan = append(plan, shards[k])
					}
				}
				plans = append(plans, plan)
				windows = append(windows, ahead+mostAtOnce(wds.ShardEnds(), d.indices))
			}
			for epoch, log := range logs {
				name := fmt.Sprintf("%v world %d epoch %d", order, world, epoch)
				window := windows[epoch]
				if order == pipeline.ShardOrder && window >= len(plans[epoch])-2 {
					t.Fatalf("%s: window %d of %d shards: the test would not stream", name, window, len(plans[epoch]))
				}
				head := plans[epoch][:min(window, len(plans[epoch]))]
				if epoch == 0 && (len(log) == 0 || !slices.Equal(log[0].names, head)) {
					t.Fatalf("%s: began with %v, want a prefetch of %q", name, log[:min(1, len(log))], head)
				}
				// In the first epoch every shard is asked for before it is first opened
				// (later, a shard may still be in the cache from the epoch before); every
				// shard an epoch reads is asked for in its log or the one before; no more
				// than the window is asked for and not opened yet at any time (plus the
				// shards the readers are about to open); no shard is asked for more than
				// twice (this epoch's plan, the next one's first window).
				asked := map[string]bool{}
				pending := map[string]bool{}
				opened := map[string]bool{}
				count := map[string]int{}
				for _, e := range log {
					switch e.op {
					case "prefetch":
						for _, n := range e.names {
							count[n]++
							asked[n] = true
							pending[n] = true
						}
						if len(pending) > window+ld.Config().Tuning.IOWorkers {
							t.Errorf("%s: %d shards asked for and not opened yet, window %d", name, len(pending), window)
						}
					case "open":
						if epoch == 0 && !opened[e.name] && !asked[e.name] {
							t.Errorf("%s: %s opened before it was asked for", name, e.name)
						}
						opened[e.name] = true
						delete(pending, e.name)
					case "release":
						t.Errorf("%s: released %s; eviction is the cache's", name, e.name)
					}
				}
				for n, c := range count {
					if c > 2 {
						t.Errorf("%s: %s prefetched %d times", name, n, c)
					}
				}
				for _, sh := range plans[epoch] {
					if count[sh] == 0 && (epoch == 0 || !slices.ContainsFunc(logs[epoch-1], func(e planEvent) bool { return slices.Contains(e.names, sh) })) {
						t.Errorf("%s: %s never prefetched", name, sh)
					}
				}
				// The next epoch's first shard is asked for before this epoch's last open.
				if epoch+1 < len(plans) {
					lastOpen := -1
					for j, e := range log {
						if e.op == "open" {
							lastOpen = j
						}
					}
					if !slices.ContainsFunc(log[:max(lastOpen, 0)], func(e planEvent) bool {
						return e.op == "prefetch" && slices.Contains(e.names, plans[epoch+1][0])
					}) {
						t.Errorf("%s: the next epoch's first shard %s was not asked for before this epoch's last read", name, plans[epoch+1][0])
					}
				}
			}
			// Starting anew from a cursor plans again, from there.
			cursor := cfg.Batch.Size // one batch in
			if order == pipeline.ShardOrder {
				cursor *= world // a global cursor
			}
			for b, err := range ld.EpochFrom(context.Background(), 5, cursor) {
				if err != nil {
					t.Fatal(err)
				}
				b.Release()
				break
			}
			if log := pfs.take(); len(log) == 0 || log[0].op != "prefetch" {
				t.Errorf("%v world %d: resuming at a cursor did not plan first", order, world)
			}
		}
	}

	// Read in plan order, one at a time: each open asks for the shards up to the window
	// (PrefetchShards 2 + 2 read at once) past its own, before opening it; past the
	// plan's end the window runs on into the next plan, which carries on as the next
	// epoch starts with the same order.
	w2, err := WebDataset(pfs, shards, &WebDatasetOptions{Classes: folder.Classes(), PrefetchShards: 2, Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	pfs.take()
	// Shards of 3: 9,10,11 in shard 3; 0,1 in 0; 20 in 6; 21,22 in 7; 4 in 1; 29 in 9;
	// 15 in 5. At most 2 shards are read at once (3 and 0, then 7 and 1).
	order := []int32{9, 10, 0, 11, 1, 20, 21, 4, 22, 29}
	next := []int32{15, 29, 0, 1, 9}
	w2.PlanEpoch(0, order)
	plan := []string{shards[3], shards[0], shards[6], shards[7], shards[1], shards[9]}
	nextPlan := []string{shards[5], shards[9], shards[0], shards[3]}
	const window = 4
	if log := pfs.take(); len(log) != 1 || !slices.Equal(log[0].names, plan[:window]) {
		t.Fatalf("planned: %v, want a prefetch of %q", log, plan[:window])
	}
	w2.PlanNext(1, next)
	if log := pfs.take(); len(log) != 0 {
		t.Fatalf("the next plan asked for %v before the window reached it", log)
	}
	furthest := -1
	for _, i := range order {
		k, _, _ := w2.at(int(i))
		place := slices.Index(plan, shards[k])
		f, err := w2.Open(int(i))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		log := pfs.take()
		var want []string
		if place > furthest {
			// This plan's shards, then the overflow from the next plan's start.
			all := append(slices.Clone(plan), nextPlan...)
			want = all[min(furthest+1+window, len(all)):min(place+1+window, len(all))]
			furthest = place
		}
		var got []string
		for _, e := range log {
			got = append(got, e.names...)
		}
		if !slices.Equal(got, want) || log[len(log)-1].op != "open" || log[len(log)-1].name != shards[k] {
			t.Fatalf("opening sample %d (shard %s, place %d): %v, want a prefetch of %q first", i, shards[k], place, log, want)
		}
	}
	// The plan's end was reached with its window 4 past the last place: the next plan's
	// first 4 were asked for; its own start does not ask again, its first open moves on.
	w2.PlanEpoch(1, next)
	if log := pfs.take(); len(log) != 0 {
		t.Fatalf("starting the planned epoch asked again: %v", log)
	}
	f, err := w2.Open(15)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if log := pfs.take(); len(log) != 1 || log[0].op != "open" {
		t.Fatalf("first open of the next epoch (window covers its whole plan): %v", log)
	}
	// A different order for that epoch (a start at a cursor) plans anew.
	w2.PlanEpoch(1, next[2:])
	if log := pfs.take(); len(log) != 1 || !slices.Equal(log[0].names, []string{shards[0], shards[3]}) {
		t.Fatalf("a new start: %v, want a prefetch of %q", log, []string{shards[0], shards[3]})
	}

	// Over a plain file system, nothing is planned and the batches are the same.
	plain, err := WebDataset(os.DirFS(sd), shards, &WebDatasetOptions{Classes: folder.Classes(), Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	a := collect(t, newLoader(t, plain, testConfig(2)), context.Background(), 1, 0)
	b := collect(t, newLoader(t, wds, testConfig(2)), context.Background(), 1, 0)
	if !bytes.Equal(a.data, b.data) || !slices.Equal(a.indices, b.indices) {
		t.Fatal("planned batches differ from unplanned ones")
	}
}

// Open opens folders, shard lists and single shards, and names the URL when it
// cannot.
func TestOpenDatasetLocal(t *testing.T) {
	tree := wdsTree(t, 2, 6)
	folder, err := Dir(tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	sd := t.TempDir()
	shards := shardsOf(t, sd, folder, 5) // 3 shards
	ctx := context.Background()
	wdsOpts := &OpenOptions{WebDataset: &WebDatasetOptions{Classes: folder.Classes(), Logf: quiet}}

	d, err := Open(ctx, tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Source.Len() != folder.Len() || d.Store != nil || d.Remote() {
		t.Errorf("folder: %v, %d samples", d, d.Source.Len())
	}
	d.Close()

	for _, url := range []string{
		filepath.Join(sd, "train-{000000..000002}.tar"),
		filepath.Join(sd, "train-*.tar"),
		"file://" + filepath.ToSlash(sd) + "/train-{000000..000002}.tar",
	} {
		d, err := Open(ctx, url, wdsOpts)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		w, ok := d.Source.(*WebDatasetSource)
		if !ok || w.Len() != folder.Len() || !slices.Equal(w.Shards(), shards) || d.Remote() || d.Stats().BytesFetched != 0 {
			t.Errorf("%s: %v: %q, remote %v, %v", url, d, w.Shards(), d.Remote(), d.Stats())
		}
		if !strings.Contains(d.String(), url) {
			t.Errorf("%s: described as %s", url, d)
		}
		a := collect(t, newLoader(t, w, testConfig(2)), ctx, 0, 0)
		b := collect(t, newLoader(t, folder, testConfig(2)), ctx, 0, 0)
		if !bytes.Equal(a.data, b.data) {
			t.Errorf("%s: batches differ from the folder's", url)
		}
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	}
	d, err = Open(ctx, filepath.Join(sd, shards[1]), wdsOpts)
	if err != nil || d.Source.Len() != 5 {
		t.Fatalf("one shard: %v, %v", d, err)
	}
	d.Close()

	// A converted dataset, with its options.
	conv := convertTree(t, 2, 5)
	d, err = Open(ctx, conv, &OpenOptions{Converted: &ConvertedOptions{Logf: t.Logf}})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := d.Source.(*Converted); !ok || c.Len() != 10 || d.Remote() {
		t.Errorf("converted: %v", d)
	}
	if err := d.Close(); err != nil {
		t.Error(err)
	}

	for _, c := range []struct{ url, want string }{
		{filepath.Join(sd, "nothing-here"), "nothing-here"},
		{filepath.Join(sd, "train-000009.tar"), "train-000009.tar"},
		{filepath.Join(sd, "train-{000001..000004}.tar"), "train-000003.tar"},
		{filepath.Join(sd, "none-*.tar"), "none-*.tar"},
		{"ftp://host/x.tar", "ftp"},
		{filepath.Join(tree, folder.Path(0)), "not a folder, a .tar shard or a manifest"},
	} {
		if _, err := Open(ctx, c.url, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %s", c.url, err, c.want)
		}
	}
}

// Open reads a folder of shards as its shards, a manifest file as Manifest does, and an
// ImageFolder tree with OpenOptions.Folder; a tree with shards beside its class folders
// is read as a tree, and an error about it names the shards' pattern.
func TestOpenDatasetShardFolderAndManifest(t *testing.T) {
	tree := wdsTree(t, 2, 6)
	folder, err := Dir(tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	sd := t.TempDir()
	shards := shardsOf(t, sd, folder, 5)
	if err := os.WriteFile(filepath.Join(sd, "train.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err) // a file beside the shards (an index) leaves the folder one of shards
	}
	ctx := context.Background()
	d, err := Open(ctx, sd, &OpenOptions{WebDataset: &WebDatasetOptions{Classes: folder.Classes(), Logf: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	w, ok := d.Source.(*WebDatasetSource)
	if !ok || w.Len() != folder.Len() || !slices.Equal(w.Shards(), shards) {
		t.Errorf("shard folder: %v", d)
	}
	d.Close()

	var csv strings.Builder
	for i := range folder.Len() {
		fmt.Fprintf(&csv, "%s,%s\n", folder.Path(i), folder.Classes()[folder.Label(i)])
	}
	for _, name := range []string{"m.csv", "M.CSV"} {
		man := filepath.Join(tree, name)
		if err := os.WriteFile(man, []byte(csv.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := Open(ctx, man, nil)
		if err != nil {
			t.Fatal(err)
		}
		a := collect(t, newLoader(t, d.Source, testConfig(2)), ctx, 0, 0)
		b := collect(t, newLoader(t, folder, testConfig(2)), ctx, 0, 0)
		if d.Source.Len() != folder.Len() || !bytes.Equal(a.data, b.data) || !slices.Equal(a.labels, b.labels) {
			t.Errorf("%s: %v: samples or batches differ from the folder's", name, d)
		}
		d.Close()
		os.Remove(man)
	}
	if _, err := Open(ctx, filepath.Join(tree, "none.jsonl"), nil); err == nil || !strings.Contains(err.Error(), "none.jsonl") {
		t.Errorf("missing manifest: error %v, want one naming it", err)
	}

	// An empty class folder: an *EmptyClassError, unless the options allow it.
	if err := os.Mkdir(filepath.Join(tree, "zzz"), 0o755); err != nil {
		t.Fatal(err)
	}
	var ee *EmptyClassError
	if _, err := Open(ctx, tree, nil); !errors.As(err, &ee) || !slices.Equal(ee.Classes, []string{"zzz"}) || !strings.Contains(err.Error(), "AllowEmptyClasses") {
		t.Errorf("empty class folder: error %v, want an *EmptyClassError naming zzz", err)
	}
	d, err = Open(ctx, tree, &OpenOptions{Folder: &FolderOptions{AllowEmptyClasses: true}})
	if err != nil || len(d.Source.Classes()) != 3 {
		t.Fatalf("AllowEmptyClasses: %v, %v", d, err)
	}
	d.Close()

	// Shards beside class folders: the folder is a tree, and an error says how to name
	// the shards.
	if err := os.WriteFile(filepath.Join(tree, "x.tar"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, tree, nil); err == nil || !strings.Contains(err.Error(), filepath.Join(tree, "*.tar")) {
		t.Errorf("tree with shards: error %v, want one naming %s", err, filepath.Join(tree, "*.tar"))
	}
}

// A tree with .tar files beside its class folders opens as the tree, and says that the
// shards are not read rather than ignoring them without a word.
func TestOpenTreeBesideShards(t *testing.T) {
	dir := treetest.New(t, 2, 2)
	if err := os.WriteFile(filepath.Join(dir, "train-000.tar"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var logged []string
	logf := func(format string, a ...any) { logged = append(logged, fmt.Sprintf(format, a...)) }
	ds, err := Open(context.Background(), dir, &OpenOptions{WebDataset: &WebDatasetOptions{Logf: logf}})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if ds.Source.Len() != 4 || len(logged) != 1 || !strings.Contains(logged[0], "not read") || !strings.Contains(logged[0], "*.tar") {
		t.Errorf("%d samples; logged %q", ds.Source.Len(), logged)
	}
}
