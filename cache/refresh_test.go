package cache

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
)

// TestRefreshIndexAhead replays what a reader sees of a live writer's shard: it stats
// the shard, then reads an index that already lists a record appended after the stat.
// That record must be found by a later Refresh, not skipped for good.
func TestRefreshIndexAhead(t *testing.T) {
	for _, readOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("ReadOnly=%t", readOnly), func(t *testing.T) {
			dir := t.TempDir()
			const n, w = 8, 12
			refs := fill(t, dir, Options{}, n, w)
			shardFile := filepath.Join(dir, refs[0].Shard())
			idxFile := shardFile[:len(shardFile)-len(shardExt)] + indexExt
			fullShard, err := os.ReadFile(shardFile)
			if err != nil {
				t.Fatal(err)
			}
			fullIdx, err := os.ReadFile(idxFile)
			if err != nil {
				t.Fatal(err)
			}
			entry := idxFixed + recordFixed + len(testKey(0).Path) // every path has the same length
			if len(fullIdx) != n*entry {
				t.Fatalf("index of %d bytes, want %d entries of %d", len(fullIdx), n, entry)
			}
			// The shard as stat saw it: records 0-4. The index as read after: entries 0-5.
			truncate(t, shardFile, refs[5].off)
			truncate(t, idxFile, int64(6*entry))

			c := open(t, dir, Options{ReadOnly: readOnly})
			if s := c.Stats(); s.Records != 5 {
				t.Fatalf("%d records, want 5", s.Records)
			}
			// The writer goes on: records 5 and up, and their index entries.
			if err := os.WriteFile(shardFile, fullShard, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(idxFile, fullIdx, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := c.Refresh(); err != nil {
				t.Fatal(err)
			}
			checkAll(t, c, n, w)
		})
	}
}

// TestReadOnlyRefreshWhileLoading refreshes a read-only Cache, which maps its shards
// anew as they grow, while other goroutines load from it; run with -race.
func TestReadOnlyRefreshWhileLoading(t *testing.T) {
	dir := t.TempDir()
	wc := open(t, dir, Options{ShardBytes: 1 << 16})
	wd := newCoder(t, wc)
	const w = 16
	put(t, wd, testKey(0), 0, testImage(0, w, w, true))
	c := open(t, dir, Options{ReadOnly: true})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 8)
	for range 2 {
		wg.Go(func() {
			d := c.NewCoder()
			defer d.Close()
			var dst decode.Image
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r, ok := c.Lookup(testKey(0))
				if !ok {
					errs <- fmt.Errorf("record 0 missing")
					return
				}
				got, err := d.Load(&dst, r)
				if err != nil {
					errs <- err
					return
				}
				if diff := samePixels(got, testImage(0, w, w, true)); diff != "" {
					errs <- fmt.Errorf("record 0: %s", diff)
					return
				}
			}
		})
	}
	for i := 1; i < 60; i++ {
		put(t, wd, testKey(i), i, testImage(uint64(i), w, w, true))
		if err := c.Refresh(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkAll(t, c, 60, w)
}
