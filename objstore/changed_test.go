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
func readCached(c *objstore.ShardCache, name string) ([]byte, error) {
	f, err := c.OpenContext(context.Background(), name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// An object replaced in the store after the cache first fetched it (and a reader
// indexed it) is refused by name when it is fetched again after eviction, whether its
// ETag, its size or only its bytes changed; an unchanged object is fetched again as before.
func TestCacheRefusesChangedObject(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new []byte
		etags    bool
		refused  bool
	}{
		{"etag", []byte("version one"), []byte("version two"), true, true},
		{"size", []byte("version one"), []byte("version three"), false, true},
		{"bytes", []byte("version one"), []byte("version 1ne"), false, true},
		{"same", []byte("version one"), []byte("version one"), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			body, etag := tc.old, `"1"`
			b, reqs := serve(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				if tc.etags {
					w.Header().Set("ETag", etag)
				}
				w.Write(body)
			})
			c, err := objstore.NewShardCache(b, &objstore.ShardCacheOptions{Dir: t.TempDir()})
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
			// Fetched once more (a byte may have flipped on the way), then refused
			// without a request: a shard is not fetched whole for every sample.
			_, err = readCached(c, "s.tar")
			n := reqs.Load()
			c.Prefetch("s.tar")
			_, err2 := readCached(c, "s.tar")
			if !errors.Is(err, objstore.ErrChanged) || !errors.Is(err2, objstore.ErrChanged) || reqs.Load() != n {
				t.Fatalf("refused again: %v, then %v after %d more requests; want ErrChanged and none", err, err2, reqs.Load()-n)
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
	c, err := objstore.NewShardCache(b, &objstore.ShardCacheOptions{Dir: t.TempDir(), MaxBytes: 1500})
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

// A store that sends neither a checksum nor an MD5 ETag (plain HTTP, multipart objects)
// lets a flipped byte through the download; the CRC-32C an index recorded catches it,
// naming the URL, and the Identity the cache reports is the one to record.
func TestCacheExpectCatchesFlippedByte(t *testing.T) {
	good := bytes.Repeat([]byte("0123456789"), 100)
	bad := bytes.Clone(good)
	bad[500] ^= 1
	b, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad.tar" {
			w.Write(bad)
			return
		}
		w.Write(good)
	})
	c, err := objstore.NewShardCache(b, &objstore.ShardCacheOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := readCached(c, "good.tar"); err != nil {
		t.Fatal(err)
	}
	id, ok := c.Identity("good.tar")
	if !ok || id.Size != int64(len(good)) || len(id.CRC32C) != 8 {
		t.Fatalf("Identity: %+v, %v", id, ok)
	}
	c.Expect("bad.tar", objstore.Identity{Size: id.Size, CRC32C: id.CRC32C})
	got, err := readCached(c, "bad.tar")
	if !errors.Is(err, objstore.ErrChanged) || !strings.Contains(err.Error(), b.URL("bad.tar")) || !strings.Contains(err.Error(), id.CRC32C) {
		t.Fatalf("flipped byte: read %d bytes, %v; want ErrChanged naming the URL and the CRC-32C", len(got), err)
	}
	c.Expect("old.tar", objstore.Identity{Size: id.Size}) // an index without a checksum
	if _, err := readCached(c, "old.tar"); err != nil {
		t.Fatalf("index without a checksum: %v", err)
	}
}
