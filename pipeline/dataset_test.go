package pipeline

import (
	"bytes"
	"context"
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
}

func (p *planFS) add(op string, names ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range names {
		p.log = append(p.log, planEvent{op, n})
	}
	if len(names) == 0 {
		p.log = append(p.log, planEvent{op, ""})
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
// order the rank first reads them, and releases each shard once, after its last read.
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
			for epoch := range 2 {
				d := collect(t, ld, context.Background(), epoch, 0)
				log := pfs.take()
				// First-use order of the shards in the samples delivered.
				var want []string
				for _, i := range d.indices {
					k, _, _ := wds.at(int(i))
					if !slices.Contains(want, shards[k]) {
						want = append(want, shards[k])
					}
				}
				var prefetched []string
				lastOpen, released := map[string]int{}, map[string]int{}
				for at, e := range log {
					switch e.op {
					case "prefetch":
						prefetched = append(prefetched, e.name)
					case "open":
						lastOpen[e.name] = at
						if _, ok := released[e.name]; ok {
							t.Errorf("%v world %d epoch %d: %s opened after its release", order, world, epoch, e.name)
						}
					case "release":
						if _, ok := released[e.name]; ok {
							t.Errorf("%v world %d epoch %d: %s released twice", order, world, epoch, e.name)
						}
						released[e.name] = at
					}
				}
				if len(log) == 0 || log[0].op != "prefetch" || !slices.Equal(prefetched, want) {
					t.Fatalf("%v world %d epoch %d: prefetched %q first, want %q before any open", order, world, epoch, prefetched, want)
				}
				if len(released) != len(want) {
					t.Errorf("%v world %d epoch %d: released %d shards, want %d", order, world, epoch, len(released), len(want))
				}
			}
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

	for _, c := range []struct{ url, want string }{
		{filepath.Join(sd, "nothing-here"), "nothing-here"},
		{filepath.Join(sd, "train-000009.tar"), "train-000009.tar"},
		{filepath.Join(sd, "train-{000001..000004}.tar"), "train-000003.tar"},
		{filepath.Join(sd, "none-*.tar"), "none-*.tar"},
		{"ftp://host/x.tar", "ftp"},
	} {
		if _, err := OpenDataset(ctx, c.url, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %s", c.url, err, c.want)
		}
	}
}
