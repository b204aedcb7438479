package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
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

// The loader plans each epoch: the WebDataset source prefetches the epoch's shards in the
// order the rank first reads them, a window ahead of the reads, and the next epoch's
// first window as an epoch ends; a start at a cursor plans again.
func TestWebDatasetPlanEpoch(t *testing.T) {
	tree := wdsTree(t, 3, 10)
	folder, err := Dir(tree)
	if err != nil {
		t.Fatal(err)
	}
	sd := t.TempDir()
	shards := shardsOf(t, sd, folder, 4)
	pfs := &planFS{FS: os.DirFS(sd)}
	wds, err := WebDataset(pfs, shards, &WebDatasetOptions{Classes: folder.Classes(), Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	pfs.take() // indexing
	for _, order := range []Order{ShardOrder, SampleOrder} {
		for _, world := range []int{1, 2} {
			cfg := testConfig(2)
			cfg.Order, cfg.World, cfg.Rank, cfg.Partitions = order, world, world-1, 2
			if order == SampleOrder {
				cfg.Partitions = 0
			}
			ld := newLoader(t, wds, cfg)
			const window = 4
			var logs [][]planEvent
			var plans [][]string
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
			}
			for epoch, log := range logs {
				name := fmt.Sprintf("%v world %d epoch %d", order, world, epoch)
				head := plans[epoch][:min(window, len(plans[epoch]))]
				if epoch == 0 && (len(log) == 0 || !slices.Equal(log[0].names, head)) {
					t.Fatalf("%s: began with %v, want a prefetch of %q", name, log[:min(1, len(log))], head)
				}
				count := map[string]int{}
				var calls [][]string
				for _, e := range log {
					switch e.op {
					case "prefetch":
						calls = append(calls, e.names)
						for _, n := range e.names {
							count[n]++
						}
					case "release":
						t.Errorf("%s: released %s; eviction is the cache's", name, e.name)
					}
				}
				// This epoch's shards, and the next epoch's first window as it ends: no
				// shard asked for more than twice.
				for n, c := range count {
					if c > 2 {
						t.Errorf("%s: %s prefetched %d times", name, n, c)
					}
				}
				if epoch+1 < len(plans) {
					next := plans[epoch+1][:min(window, len(plans[epoch+1]))]
					if !slices.ContainsFunc(calls, func(c []string) bool { return slices.Equal(c, next) }) {
						t.Errorf("%s: the next epoch's first window %q was not asked for; calls %q", name, next, calls)
					}
				}
				// Every shard the epoch reads is asked for: in its log or the one before.
				for _, sh := range plans[epoch] {
					if count[sh] == 0 && (epoch == 0 || !slices.ContainsFunc(logs[epoch-1], func(e planEvent) bool { return slices.Contains(e.names, sh) })) {
						t.Errorf("%s: %s never prefetched", name, sh)
					}
				}
			}
			// Starting anew from a cursor plans again, from there.
			cursor := cfg.BatchSize // one batch in
			if order == ShardOrder {
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

	// Read in plan order, one at a time: each open asks for the shards up to
	// PrefetchShards places past its own, before opening it.
	w2, err := WebDataset(pfs, shards, &WebDatasetOptions{Classes: folder.Classes(), PrefetchShards: 2, Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	pfs.take()
	order := []int32{9, 10, 0, 11, 1, 20, 21, 4, 22, 29}
	w2.PlanEpoch(0, order)
	plan := []string{shards[2], shards[0], shards[5], shards[1], shards[7]}
	if log := pfs.take(); len(log) != 1 || !slices.Equal(log[0].names, plan[:2]) {
		t.Fatalf("planned: %v, want a prefetch of %q", log, plan[:2])
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
			want = plan[min(furthest+3, len(plan)):min(place+3, len(plan))]
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

// OpenDataset opens folders, shard lists and single shards, and names the URL when it
// cannot.
func TestOpenDatasetLocal(t *testing.T) {
	tree := wdsTree(t, 2, 6)
	folder, err := Dir(tree)
	if err != nil {
		t.Fatal(err)
	}
	sd := t.TempDir()
	shards := shardsOf(t, sd, folder, 5) // 3 shards
	ctx := context.Background()
	wdsOpts := &DatasetOptions{WebDataset: &WebDatasetOptions{Classes: folder.Classes(), Logf: quiet}}

	d, err := OpenDataset(ctx, tree, nil)
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
		d, err := OpenDataset(ctx, url, wdsOpts)
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
	d, err = OpenDataset(ctx, filepath.Join(sd, shards[1]), wdsOpts)
	if err != nil || d.Source.Len() != 5 {
		t.Fatalf("one shard: %v, %v", d, err)
	}
	d.Close()

	// A converted dataset, with its options.
	conv := convertTree(t, 2, 5)
	d, err = OpenDataset(ctx, conv, &DatasetOptions{Converted: ConvertedOptions{Logf: t.Logf}})
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
		{filepath.Join(tree, folder.Path(0)), "neither a folder nor a .tar shard"},
	} {
		if _, err := OpenDataset(ctx, c.url, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %s", c.url, err, c.want)
		}
	}
}
