package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/conveyor-ml/conveyor/internal/s3test"
	"github.com/conveyor-ml/conveyor/objstore"
)

// readCached opens name in c, reads it whole and closes it.
func readCached(c *objstore.Cache, name string) ([]byte, error) {
	f, err := c.OpenContext(context.Background(), name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// An object replaced in the store after the cache first fetched it (and a reader
// indexed it) is refused by name when it is fetched again after eviction, whether its
// ETag or only its size changed; an unchanged object is fetched again as before.
func TestCacheRefusesChangedObject(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new []byte
		etags    bool
		refused  bool
	}{
		{"etag", []byte("version one"), []byte("version two"), true, true},
		{"size", []byte("version one"), []byte("version three"), false, true},
		{"same", []byte("version one"), []byte("version one"), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			body, etag := tc.old, `"1"`
			b, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				if tc.etags {
					w.Header().Set("ETag", etag)
				}
				w.Write(body)
			})
			c, err := objstore.NewCache(b, &objstore.CacheOptions{Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			got, err := readCached(c, "s.tar")
			if err != nil || !bytes.Equal(got, tc.old) {
				t.Fatalf("first read: %q, %v", got, err)
			}
			c.Release("s.tar") // evicted: the next Open fetches again
			mu.Lock()
			body = tc.new
			if !bytes.Equal(tc.new, tc.old) {
				etag = `"2"`
			}
			mu.Unlock()
			got, err = readCached(c, "s.tar")
			if !tc.refused {
				if err != nil || !bytes.Equal(got, tc.new) {
					t.Fatalf("unchanged object: %q, %v", got, err)
				}
				return
			}
			if !errors.Is(err, objstore.ErrChanged) || !strings.Contains(err.Error(), b.URL("s.tar")) {
				t.Fatalf("changed object: got %q, %v; want ErrChanged naming %s", got, err, b.URL("s.tar"))
			}
		})
	}
}

// The same against S3 stores: a shard replaced between epochs, evicted by a cache too
// small for two shards, is refused when the next epoch fetches it again.
func TestS3CacheRefusesReplacedShard(t *testing.T) { s3test.Each(t, testS3CacheRefusesReplacedShard) }

func testS3CacheRefusesReplacedShard(t *testing.T, srv *s3test.Server) {
	a, z := bytes.Repeat([]byte("a"), 1000), bytes.Repeat([]byte("z"), 1000)
	srv.Put(t, "d/0.tar", a)
	srv.Put(t, "d/1.tar", z)
	srv.Env(t, srv.Endpoint)
	b, err := objstore.OpenBucket(context.Background(), srv.URL("d/"), fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := objstore.NewCache(b, &objstore.CacheOptions{Dir: t.TempDir(), MaxBytes: 1500})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, n := range []string{"0.tar", "1.tar"} {
		if _, err := readCached(c, n); err != nil {
			t.Fatal(err)
		}
	}
	srv.Put(t, "d/0.tar", bytes.Repeat([]byte("b"), 1000)) // same size, new ETag
	_, err = readCached(c, "0.tar")
	if !errors.Is(err, objstore.ErrChanged) || !strings.Contains(err.Error(), b.URL("0.tar")) {
		t.Fatalf("replaced shard: %v; want ErrChanged naming %s", err, b.URL("0.tar"))
	}
	if got, err := readCached(c, "1.tar"); err != nil || !bytes.Equal(got, z) {
		t.Fatalf("unchanged shard: %v", err)
	}
}
