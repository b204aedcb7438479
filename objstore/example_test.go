package objstore_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/conveyor-ml/conveyor/objstore"
)

// A shard list is resolved to a bucket and names, and the shards are read through a
// cache that fetches ahead. The same code reads s3://bucket/train-{000..002}.tar or
// https://host/train-{000..002}.tar; a local directory keeps the example self-contained.
func Example() {
	dir, _ := os.MkdirTemp("", "shards")
	defer os.RemoveAll(dir)
	for i := range 3 {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("train-%03d.tar", i)), []byte(fmt.Sprint("shard ", i)), 0o644)
	}
	ctx := context.Background()
	b, names, err := objstore.Resolve(ctx, dir+"/train-{000..002}.tar", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	c, err := objstore.NewShardCache(b, &objstore.ShardCacheOptions{MaxBytes: 1 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	c.Prefetch(names...)
	for _, n := range names {
		f, err := c.Open(n)
		if err != nil {
			fmt.Println(err)
			return
		}
		data, _ := io.ReadAll(f)
		f.Close()
		c.Release(n) // done with it: free its disk now
		fmt.Printf("%s: %s\n", n, data)
	}
	st := c.Stats()
	fmt.Println("fetched", st.Fetched, "evicted", st.Evictions)
	// Output:
	// train-000.tar: shard 0
	// train-001.tar: shard 1
	// train-002.tar: shard 2
	// fetched 3 evicted 3
}
