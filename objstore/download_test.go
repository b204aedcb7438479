package objstore_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/conveyor-ml/conveyor/internal/s3test"
	"github.com/conveyor-ml/conveyor/objstore"
)

// serve starts a web server of one handler and opens a bucket on it.
func serve(t *testing.T, h http.HandlerFunc) (*objstore.Bucket, *atomic.Int64) {
	t.Helper()
	var reqs atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqs.Add(1)
		h(w, r)
	}))
	t.Cleanup(hs.Close)
	b, err := objstore.OpenBucket(context.Background(), hs.URL+"/", fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, &reqs
}

func download(t *testing.T, b *objstore.Bucket, name string) (objstore.Object, []byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f, err := os.Create(filepath.Join(t.TempDir(), "dl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	o, err := b.Download(ctx, name, f, nil)
	if ctx.Err() != nil {
		t.Fatalf("Download did not stop by itself: %v", err)
	}
	got, _ := os.ReadFile(f.Name())
	return o, got, err
}

// A 32-hex ETag that is not the body's MD5 (SSE-KMS, SSE-C, some S3-compatible stores)
// ends the download after a few tries, naming the URL, instead of fetching forever; the
// encryption headers say when the ETag is no MD5 at all.
func TestDownloadETagNotMD5(t *testing.T) {
	body := bytes.Repeat([]byte("shard"), 1000)
	sum := md5.Sum([]byte("something else"))
	etag := hex.EncodeToString(sum[:])
	b, reqs := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"`+etag+`"`)
		switch r.URL.Path {
		case "/kms.bin":
			w.Header().Set("X-Amz-Server-Side-Encryption", "aws:kms")
		case "/ssec.bin":
			w.Header().Set("X-Amz-Server-Side-Encryption-Customer-Algorithm", "AES256")
		}
		w.Write(body)
	})
	_, _, err := download(t, b, "plain.bin")
	t.Log(err)
	if err == nil || !strings.Contains(err.Error(), b.URL("plain.bin")) || !strings.Contains(err.Error(), "MD5") {
		t.Errorf("mismatched MD5: %v", err)
	}
	if n := reqs.Load(); n > 3 {
		t.Errorf("%d requests for a body whose MD5 never matches; want 3", n)
	}
	for _, name := range []string{"kms.bin", "ssec.bin"} {
		o, got, err := download(t, b, name)
		if err != nil || !bytes.Equal(got, body) || o.ETag != etag {
			t.Errorf("%s: %+v, %d bytes, %v", name, o, len(got), err)
		}
	}
}

// A full-object checksum in the response is checked, also where the ETag is no MD5 (a
// multipart upload's); a wrong one fails naming the URL and the algorithm after a few
// tries; a composite checksum, which the body alone cannot confirm, is left alone.
func TestDownloadChecksum(t *testing.T) {
	body := bytes.Repeat([]byte("shard"), 3000)
	sum := func(tab *crc32.Table, b []byte) string {
		return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.Checksum(b, tab)))
	}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	b, reqs := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef-2"`)
		switch r.URL.Path {
		case "/good.bin":
			w.Header().Set("X-Amz-Checksum-Crc32c", sum(castagnoli, body))
			w.Header().Set("X-Amz-Checksum-Type", "FULL_OBJECT")
		case "/bad.bin":
			w.Header().Set("X-Amz-Checksum-Crc32c", sum(castagnoli, []byte("other")))
		case "/ieee.bin":
			w.Header().Set("X-Amz-Checksum-Crc32", sum(crc32.IEEETable, []byte("other")))
		case "/composite.bin":
			w.Header().Set("X-Amz-Checksum-Crc32c", sum(castagnoli, []byte("other"))+"-2")
			w.Header().Set("X-Amz-Checksum-Type", "COMPOSITE")
		}
		w.Write(body)
	})
	for _, name := range []string{"good.bin", "composite.bin"} {
		if _, got, err := download(t, b, name); err != nil || !bytes.Equal(got, body) {
			t.Errorf("%s: %d bytes, %v", name, len(got), err)
		}
	}
	for name, alg := range map[string]string{"bad.bin": "CRC32C", "ieee.bin": "CRC32"} {
		reqs.Store(0)
		_, _, err := download(t, b, name)
		t.Log(err)
		if err == nil || !strings.Contains(err.Error(), b.URL(name)) || !strings.Contains(err.Error(), "checksum "+alg+" ") {
			t.Errorf("%s: %v, want a %s mismatch naming the URL", name, err, alg)
		}
		if n := reqs.Load(); n > 3 {
			t.Errorf("%s: %d requests for a body whose checksum never matches; want 3", name, n)
		}
	}
}

// A store that ignores ranges and always cuts the body at the same place, while its
// Content-Length agrees with what it sends, is given up on instead of re-fetched forever.
func TestDownloadAlwaysShort(t *testing.T) {
	body := bytes.Repeat([]byte{7}, 200)
	b, reqs := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes 0-99/%d", len(body)))
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusPartialContent)
		w.Write(body[:100])
	})
	_, _, err := download(t, b, "short.bin")
	t.Log(err)
	if !errors.Is(err, objstore.ErrTruncated) || !strings.Contains(err.Error(), b.URL("short.bin")) {
		t.Errorf("always short: %v", err)
	}
	if n := reqs.Load(); n > 5 {
		t.Errorf("%d requests for a body always cut at the same place", n)
	}
}

// A response of unknown size (chunked) is reserved as it arrives: the cache's byte
// count never goes negative, and an object that outgrows the cache fails naming it.
func TestCacheUnknownSize(t *testing.T) {
	small := bytes.Repeat([]byte{1}, 30<<10)
	big := bytes.Repeat([]byte{2}, 300<<10)
	b, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		body := small
		if r.URL.Path == "/big.bin" {
			body = big
		}
		for len(body) > 0 { // flushing before the end makes the response chunked
			n := min(len(body), 8<<10)
			w.Write(body[:n])
			w.(http.Flusher).Flush()
			body = body[n:]
		}
	})
	const limit = 100 << 10
	c, err := objstore.NewShardCache(b, &objstore.ShardCacheOptions{MaxBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, err := c.Open("small.bin")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if !bytes.Equal(got, small) {
		t.Errorf("small.bin: %d bytes differ", len(got))
	}
	if st := c.Stats(); st.CachedBytes != int64(len(small)) {
		t.Errorf("CachedBytes %d after a chunked object of %d bytes", st.CachedBytes, len(small))
	}
	_, err = c.Open("big.bin")
	if !errors.Is(err, objstore.ErrTooLarge) || !strings.Contains(err.Error(), b.URL("big.bin")) {
		t.Errorf("chunked object larger than the cache: %v", err)
	}
	// The Open may have evicted small.bin to make room.
	if st := c.Stats(); (st.CachedBytes != 0 && st.CachedBytes != int64(len(small))) || st.PeakBytes > limit {
		t.Errorf("after a failed chunked object: %+v", st)
	}
}

// A cached object reports its Last-Modified, or without one a time fixed by its ETag,
// never the time it was downloaded: keys built from it hold across runs.
func TestCacheModTime(t *testing.T) {
	lm := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	b, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/dated.bin" {
			w.Header().Set("Last-Modified", lm.Format(http.TimeFormat))
		}
		w.Header().Set("ETag", `"v1-`+r.URL.Path+`"`)
		w.Write([]byte("data"))
	})
	mtimes := func() (dated, undated time.Time) {
		c, err := objstore.NewShardCache(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, n := range []string{"dated.bin", "undated.bin"} {
			f, err := c.Open(n)
			if err != nil {
				t.Fatal(err)
			}
			fi, _ := f.(*objstore.File).Stat()
			f.Close()
			si, err := c.Stat(n)
			if err != nil || !si.ModTime().Equal(fi.ModTime()) {
				t.Errorf("%s: Cache.Stat ModTime %v, File.Stat %v (%v)", n, si.ModTime(), fi.ModTime(), err)
			}
			if n == "dated.bin" {
				dated = fi.ModTime()
			} else {
				undated = fi.ModTime()
			}
		}
		return dated, undated
	}
	d1, u1 := mtimes()
	time.Sleep(1100 * time.Millisecond) // a download time would differ now
	d2, u2 := mtimes()
	if !d1.Equal(lm) || !d2.Equal(lm) {
		t.Errorf("Last-Modified %v, ModTime %v then %v", lm, d1, d2)
	}
	if u1.IsZero() || !u1.Equal(u2) || u1.After(time.Now().Add(-time.Hour)) {
		t.Errorf("without Last-Modified: ModTime %v then %v; want a fixed time from the ETag", u1, u2)
	}
}

// Caches sharing a Dir (the ranks on one node) keep to their own files: closing one
// leaves the other's objects, and Close leaves nothing behind.
func TestCacheSharedDir(t *testing.T) {
	data := shards(2, 10<<10, 20<<10, 9)
	b := localBucket(t, data)
	dir := t.TempDir()
	c1, err := objstore.NewShardCache(b, &objstore.ShardCacheOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := objstore.NewShardCache(b, &objstore.ShardCacheOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	names := sortedNames(data)
	readAll(t, c1, names, data)
	readAll(t, c2, names, data)
	c1.Release(names[0])
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := c2.Open(names[0])
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if st := c2.Stats(); st.Fetched != int64(len(names)) {
		t.Errorf("the second cache fetched %d objects for %d names: the first removed its files", st.Fetched, len(names))
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("closed caches left %d entries in their Dir", len(ents))
	}
}

// While an Open waits for room, no prefetch starts: it would take the space freed for
// the Open, which would then evict it (a wasted fetch).
func TestCacheParkedOpenHoldsBackPrefetch(t *testing.T) {
	const unit = 10 << 10
	data := map[string][]byte{
		"h1.bin": bytes.Repeat([]byte{1}, 2*unit), "h2.bin": bytes.Repeat([]byte{2}, unit),
		"h3.bin": bytes.Repeat([]byte{3}, unit), "p.bin": bytes.Repeat([]byte{4}, unit),
		"x.bin": bytes.Repeat([]byte{5}, 3*unit),
	}
	b := localBucket(t, data)
	c, err := objstore.NewShardCache(b, &objstore.ShardCacheOptions{MaxBytes: 4 * unit})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var held []fs.File
	for _, n := range []string{"h1.bin", "h2.bin", "h3.bin"} {
		f, err := c.Open(n)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, f)
	}
	type result struct {
		f   fs.File
		err error
	}
	done := make(chan result, 1)
	go func() {
		f, err := c.Open("x.bin") // parks: the cache is full of open objects
		done <- result{f, err}
	}()
	for c.Stats().Requests < 4 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	c.Prefetch("p.bin")
	held[0].Close() // room for p.bin, not yet for x.bin
	time.Sleep(100 * time.Millisecond)
	held[1].Close() // now room for x.bin
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if st := c.Stats(); st.Fetched != 4 || st.Evictions != 2 {
		t.Errorf("%+v: want 4 fetched and 2 evicted, p.bin not fetched while x.bin waited", st)
	}
	r.f.Close()
	held[2].Close()
}

// An object in the cache and unused that is asked for again (the next epoch's plan
// wants it) is kept from the prefetches that follow it, as a fetched one would be:
// they evict the least recently used objects not asked for, not it.
func TestCachePrefetchKeepsLocalObject(t *testing.T) {
	const unit = 10 << 10
	data := map[string][]byte{}
	for _, n := range []string{"a", "b", "c", "d"} {
		data[n+".bin"] = bytes.Repeat([]byte(n), unit)
	}
	b := localBucket(t, data)
	c, err := objstore.NewShardCache(b, &objstore.ShardCacheOptions{MaxBytes: 3 * unit})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, n := range []string{"a.bin", "b.bin", "c.bin"} { // a is the least recent
		f, err := c.Open(n)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	c.Prefetch("a.bin", "d.bin") // d needs room: b goes, not a
	for c.Stats().Fetched < 4 {
		time.Sleep(time.Millisecond)
	}
	before := c.Stats()
	f, err := c.Open("a.bin")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if st := c.Stats(); st.Fetched != before.Fetched || st.Hits != before.Hits+1 {
		t.Errorf("a.bin was fetched again (%+v, before %+v): the prefetch of d.bin evicted it", st, before)
	}
}

// A listing longer than one page (1000 keys) is fetched page by page, each page its own
// request, and comes back whole and sorted.
func TestS3ListPages(t *testing.T) { s3test.Each(t, testS3ListPages) }

func testS3ListPages(t *testing.T, srv *s3test.Server) {
	srv.Env(t, "")
	ctx := context.Background()
	b, err := objstore.OpenBucket(ctx, srv.URL("many/"), fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const n = 1005
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			return b.Put(ctx, fmt.Sprintf("k-%04d", i), strings.NewReader("x"), 1)
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	before := b.Stats().Requests
	objs, err := b.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != n || objs[0].Name != "k-0000" || objs[n-1].Name != fmt.Sprintf("k-%04d", n-1) || objs[0].ModTime.IsZero() {
		t.Fatalf("listed %d objects (first %+v), want %d", len(objs), objs[0], n)
	}
	if reqs := b.Stats().Requests - before; reqs < 2 {
		t.Errorf("%d requests for %d keys: want one per page", reqs, n)
	}
}
