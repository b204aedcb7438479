package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/conveyor-ml/conveyor/internal/leakcheck"
	"github.com/conveyor-ml/conveyor/internal/s3test"
	"github.com/conveyor-ml/conveyor/objstore"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		os.Exit(m.Run()) // the fuzzing engine keeps a signal handler running
	}
	leakcheck.Main(m)
}

// shards makes n objects of random sizes in [lo, hi) bytes, named s-000.bin on.
func shards(n, lo, hi int, seed uint64) map[string][]byte {
	r := rand.New(rand.NewPCG(seed, 1))
	out := map[string][]byte{}
	for i := range n {
		b := make([]byte, lo+r.IntN(hi-lo))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		out[fmt.Sprintf("s-%03d.bin", i)] = b
	}
	return out
}

func sortedNames(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

var fastRetry = &objstore.Options{Retry: objstore.RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond, AttemptTimeout: 10 * time.Second}}

// readAll reads every name through a cache, a few goroutines at a time, and checks the
// bytes against want.
func readAll(t *testing.T, c *objstore.ShardCache, names []string, want map[string][]byte) {
	t.Helper()
	c.Prefetch(names...)
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	sem := make(chan struct{}, 3)
	for _, n := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f, err := c.Open(n)
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			got, err := io.ReadAll(f)
			if err != nil {
				errs <- err
				return
			}
			if !bytes.Equal(got, want[n]) {
				errs <- fmt.Errorf("%s: %d bytes differ from the %d stored", n, len(got), len(want[n]))
			}
			if fi, err := f.Stat(); err != nil || fi.Name() != filepath.Base(n) || fi.Size() != int64(len(want[n])) {
				errs <- fmt.Errorf("%s: Stat = %v, %v", n, fi, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestS3PutResolveRead(t *testing.T) { s3test.Each(t, testS3PutResolveRead) }

func testS3PutResolveRead(t *testing.T, srv *s3test.Server) {
	srv.Env(t, "")
	ctx := context.Background()
	opts := *fastRetry
	opts.PartSize = 5 << 20
	b, err := objstore.OpenBucket(ctx, srv.URL("train/"), &opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	data := shards(6, 1, 200<<10, 1)
	big := bytes.Repeat([]byte("0123456789abcdef"), (11<<20)/16+3) // three parts
	data["big.bin"] = big
	for n, d := range data {
		if err := b.Put(ctx, n, bytes.NewReader(d), int64(len(d))); err != nil {
			t.Fatalf("Put %s: %v", n, err)
		}
	}
	if got := srv.Get(t, "train/big.bin"); !bytes.Equal(got, big) {
		t.Fatalf("multipart upload stored %d bytes, want %d", len(got), len(big))
	}
	if st := b.Stats(); st.BytesUploaded != int64(len(big))+sum(data)-int64(len(big)) {
		t.Errorf("BytesUploaded %d, want %d", st.BytesUploaded, sum(data))
	}
	all := sortedNames(data)
	for _, tc := range []struct {
		spec string
		want []string
	}{
		{srv.URL("train/s-{000..005}.bin"), all[1:]},
		{srv.URL("train/s-*.bin"), all[1:]},
		{srv.URL("train/s-00[13].bin"), []string{"s-001.bin", "s-003.bin"}},
		{srv.URL("train"), all},
		{srv.URL("train/"), all},
		{srv.URL("train/s-002.bin"), []string{"s-002.bin"}},
	} {
		rb, names, err := objstore.Resolve(ctx, tc.spec, fastRetry)
		if rb != nil {
			defer rb.Close()
		}
		if err != nil || !reflect.DeepEqual(names, tc.want) {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tc.spec, names, err, tc.want)
			continue
		}
		if !strings.HasPrefix(rb.URL(names[0]), srv.URL("train/")) {
			t.Errorf("Resolve(%q): URL %s", tc.spec, rb.URL(names[0]))
		}
	}
	if _, _, err := objstore.Resolve(ctx, srv.URL("nothing/here"), fastRetry); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), srv.URL("nothing/here")) {
		t.Errorf("Resolve of nothing: %v, want ErrNotExist naming the URL", err)
	}

	c, err := objstore.NewShardCache(b, &objstore.ShardCacheOptions{MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	readAll(t, c, all, data)
	st := c.Stats()
	if st.Fetched != int64(len(all)) || st.Retries != 0 || st.BytesFetched != sum(data) {
		t.Errorf("stats %+v: want %d fetched, no retries, %d bytes", st, len(all), sum(data))
	}
	// Open again: hits, no requests.
	before := c.Stats()
	f, err := c.Open("s-001.bin")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if after := c.Stats(); after.Hits != before.Hits+1 || after.Requests != before.Requests {
		t.Errorf("second Open: hits %d→%d, requests %d→%d", before.Hits, after.Hits, before.Requests, after.Requests)
	}
}

func sum(m map[string][]byte) int64 {
	var n int64
	for _, d := range m {
		n += int64(len(d))
	}
	return n
}

func TestS3Faults(t *testing.T) { s3test.Each(t, testS3Faults) }

func testS3Faults(t *testing.T, srv *s3test.Server) {
	data := shards(24, 64<<10, 400<<10, 2)
	for n, d := range data {
		srv.Put(t, "wds/"+n, d)
	}
	p := s3test.NewProxy(t, srv.Endpoint, s3test.Faults{Latency: 2 * time.Millisecond, SlowDown: 5, Reset: 3, Truncate: 4, Short: 7})
	srv.Env(t, p.URL)
	ctx := context.Background()
	b, names, err := objstore.Resolve(ctx, srv.URL("wds/s-{000..023}.bin"), fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := objstore.NewShardCache(b, &objstore.ShardCacheOptions{MaxBytes: 64 << 20, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	readAll(t, c, names, data)
	st := c.Stats()
	counts := p.Counts()
	t.Logf("stats %+v, faults %v", st, counts)
	for _, f := range []string{"slowdown", "reset", "truncate", "short"} {
		if counts[f] == 0 {
			t.Errorf("no %s fault injected: %v", f, counts)
		}
	}
	faults := int64(counts["slowdown"] + counts["reset"] + counts["truncate"] + counts["short"])
	if st.Retries != faults {
		t.Errorf("%d retries for %d faults", st.Retries, faults)
	}
	if st.Fetched != int64(len(names)) {
		t.Errorf("fetched %d of %d", st.Fetched, len(names))
	}
}

// Against versitygw: objects carry full-object checksums (CRC64NVME by default, or the
// one the upload asked for); a body changed in flight (same length) is caught by it and
// fetched again, and one changed every time fails naming the URL and the algorithm.
// Against a server that adds no checksum to an upload without one (gofakes3), the ETag,
// an MD5 of the content, catches it.
func TestS3Checksum(t *testing.T) { s3test.Each(t, testS3Checksum) }

func testS3Checksum(t *testing.T, srv *s3test.Server) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 20000)
	srv.Put(t, "c/default.bin", data)
	srv.PutChecksum(t, "c/crc32c.bin", data, "CRC32C")
	srv.PutChecksum(t, "c/crc32.bin", data, "CRC32")
	algs := map[string]string{"default.bin": "CRC64NVME", "crc32c.bin": "CRC32C", "crc32.bin": "CRC32"}
	ctx := context.Background()
	if !srv.Checksums {
		algs["default.bin"] = "MD5"
	}
	for _, every := range []int{2, 1} {
		p := s3test.NewProxy(t, srv.Endpoint, s3test.Faults{Corrupt: every})
		srv.Env(t, p.URL)
		b, err := objstore.OpenBucket(ctx, srv.URL("c/"), fastRetry)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		for name, alg := range algs {
			o, got, err := download(t, b, name)
			switch {
			case every == 2 && (err != nil || !bytes.Equal(got, data) || o.Size != int64(len(data))):
				t.Errorf("%s, every 2nd GET corrupted: %d bytes, %v", name, len(got), err)
			case every == 1 && (err == nil || !strings.Contains(err.Error(), srv.URL("c/"+name)) || !strings.Contains(err.Error(), "checksum "+alg+" ") && !(alg == "MD5" && strings.Contains(err.Error(), "MD5 (the ETag)"))):
				t.Errorf("%s, every GET corrupted: %v, want a %s mismatch naming the URL", name, err, alg)
			}
		}
		if n := p.Counts()["corrupt"]; n == 0 {
			t.Errorf("every %d: no body corrupted", every)
		}
		if st := b.Stats(); every == 2 && st.Retries != int64(p.Counts()["corrupt"]) {
			t.Errorf("%d retries for %d corrupted bodies", st.Retries, p.Counts()["corrupt"])
		}
	}
}

func TestS3Errors(t *testing.T) { s3test.Each(t, testS3Errors) }

func testS3Errors(t *testing.T, srv *s3test.Server) {
	srv.Put(t, "d/a.bin", []byte("hello"))
	srv.Env(t, "")
	ctx := context.Background()
	b, err := objstore.OpenBucket(ctx, srv.URL("d/"), fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := objstore.NewShardCache(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Open("missing.bin")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), srv.URL("d/missing.bin")) {
		t.Errorf("missing object: %v, want ErrNotExist naming %s", err, srv.URL("d/missing.bin"))
	}
	if st := c.Stats(); st.Retries != 0 {
		t.Errorf("404 retried %d times", st.Retries)
	}
	// A bucket that does not exist.
	nb, _ := objstore.OpenBucket(ctx, "s3://no-such-bucket/x/", fastRetry)
	defer nb.Close()
	if _, err := nb.Stat(ctx, "a.bin"); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "s3://no-such-bucket/x/a.bin") {
		t.Errorf("missing bucket: %v", err)
	}
	if !srv.Auth {
		return // gofakes3 checks no signature: wrong credentials are let in
	}
	// Wrong credentials: refused at once, naming the URL.
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
	bad, err := objstore.OpenBucket(ctx, srv.URL("d/"), fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	bc, _ := objstore.NewShardCache(bad, nil)
	defer bc.Close()
	_, err = bc.Open("a.bin")
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), srv.URL("d/a.bin")) {
		t.Errorf("bad credentials: %v, want ErrPermission naming %s", err, srv.URL("d/a.bin"))
	}
	if st := bc.Stats(); st.Retries != 0 || st.Requests != 1 {
		t.Errorf("403: %d requests, %d retries; want 1 and 0", st.Requests, st.Retries)
	}
}

// localBucket writes data into a directory and opens it as a bucket.
func localBucket(t *testing.T, data map[string][]byte) *objstore.Bucket {
	dir := t.TempDir()
	for n, d := range data {
		if err := os.WriteFile(filepath.Join(dir, n), d, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := objstore.OpenBucket(context.Background(), dir, fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func dirBytes(t *testing.T, dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func TestCacheEvictionKeepsDiskUnderLimit(t *testing.T) {
	data := shards(12, 100<<10, 100<<10+1, 3)
	b := localBucket(t, data)
	const limit = 350 << 10 // three shards
	cdir := t.TempDir()
	c, err := objstore.NewShardCache(b, &objstore.ShardCacheOptions{Dir: cdir, MaxBytes: limit, Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	names := sortedNames(data)
	c.Prefetch(names...) // more than fits: the rest wait for room
	for _, n := range names {
		f, err := c.Open(n)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(f)
		if !bytes.Equal(got, data[n]) {
			t.Fatalf("%s differs", n)
		}
		if d := dirBytes(t, cdir); d > limit {
			t.Fatalf("cache directory holds %d bytes, limit %d", d, limit)
		}
		f.Close()
	}
	st := c.Stats()
	// Fetches reserve space when their sizes arrive, in whatever order that is, so an
	// Open may now and then evict a prefetched shard that is then fetched again.
	if st.PeakBytes > limit || st.Evictions < int64(len(names))-3 || st.Fetched < int64(len(names)) || st.Fetched > int64(len(names))+2 {
		t.Errorf("stats %+v: want peak ≤ %d, ≥ %d evictions, %d fetched (at most 2 twice)", st, limit, len(names)-3, len(names))
	}
	// Release removes at once.
	c.Release(names[len(names)-1])
	if st2 := c.Stats(); st2.Evictions != st.Evictions+1 || st2.CachedBytes != st.CachedBytes-int64(len(data[names[len(names)-1]])) {
		t.Errorf("Release: %+v after %+v", st2, st)
	}
	// An object larger than the whole cache fails naming it.
	big := map[string][]byte{"huge.bin": make([]byte, limit+1)}
	hb := localBucket(t, big)
	hc, _ := objstore.NewShardCache(hb, &objstore.ShardCacheOptions{MaxBytes: limit})
	defer hc.Close()
	if _, err := hc.Open("huge.bin"); !errors.Is(err, objstore.ErrTooLarge) || !strings.Contains(err.Error(), "huge.bin") {
		t.Errorf("huge object: %v", err)
	}
}

func TestCacheFirstOpenDoesNotWait(t *testing.T) {
	data := shards(16, 32<<10, 33<<10, 4)
	dir := t.TempDir()
	for n, d := range data {
		os.WriteFile(filepath.Join(dir, n), d, 0o644)
	}
	// Every object but the first and the last is held back until it gets a token (or
	// the gate opens at the end), so the test decides how many prefetches finish.
	gate := make(chan struct{})
	tokens := make(chan struct{}, len(data))
	files := http.FileServer(http.Dir(dir))
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/s-000.bin" && r.URL.Path != "/s-015.bin" {
			select {
			case <-tokens:
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		files.ServeHTTP(w, r)
	}))
	defer hs.Close()
	defer close(gate) // before hs.Close, which waits for the handlers
	b, names, err := objstore.Resolve(context.Background(), hs.URL+"/s-{000..015}.bin", fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, _ := objstore.NewShardCache(b, &objstore.ShardCacheOptions{Concurrency: 2})
	defer c.Close()
	c.Prefetch(names...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f, err := c.OpenContext(ctx, names[0])
	if err != nil {
		t.Fatalf("first Open: %v", err)
	}
	f.Close()
	if st := c.Stats(); st.Fetched != 1 {
		t.Errorf("first Open: %d objects fetched, want 1", st.Fetched)
	}
	// An Open for the last name goes before the prefetches queued ahead of it: it takes
	// the first slot a prefetch gives back (both are taken by held prefetches).
	tokens <- struct{}{}
	f, err = c.OpenContext(ctx, names[len(names)-1])
	if err != nil {
		t.Fatalf("Open of the last name behind the prefetches: %v", err)
	}
	f.Close()
	if st := c.Stats(); st.Fetched > 3 {
		t.Errorf("Open of the last name waited for %d fetches, want at most 3", st.Fetched)
	}
	// OpenContext gives up when its context ends, naming the URL.
	c2, _ := objstore.NewShardCache(b, nil)
	defer c2.Close()
	// (names[3] is held at the gate.)
	dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer dcancel()
	if _, err := c2.OpenContext(dctx, names[3]); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), b.URL(names[3])) {
		t.Errorf("OpenContext past its deadline: %v", err)
	}
}

func TestHTTPFaultsAndResume(t *testing.T) {
	data := shards(10, 100<<10, 300<<10, 5)
	dir := t.TempDir()
	for n, d := range data {
		os.WriteFile(filepath.Join(dir, n), d, 0o644)
	}
	hs := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer hs.Close()
	p := s3test.NewProxy(t, hs.URL, s3test.Faults{Reset: 3, Truncate: 4, SlowDown: 5})
	b, names, err := objstore.Resolve(context.Background(), p.URL+"/s-{000..009}.bin", fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, _ := objstore.NewShardCache(b, nil)
	defer c.Close()
	readAll(t, c, names, data)
	st := c.Stats()
	// Resumed downloads fetch each byte about once: truncations cost no re-download.
	if st.Retries == 0 || st.BytesFetched > sum(data)+sum(data)/10 {
		t.Errorf("stats %+v: want retries and about %d bytes fetched", st, sum(data))
	}
	_, err = c.Open("nope.bin")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), p.URL+"/nope.bin") {
		t.Errorf("404 over HTTP: %v", err)
	}
}

// TestS3SharedConfigProfile reads credentials and the endpoint from a named profile in
// the shared config and credentials files, with nothing in the environment but
// AWS_PROFILE and the files' paths: the standard chain, not a home-made one.
func TestS3SharedConfigProfile(t *testing.T) { s3test.Each(t, testS3SharedConfigProfile) }

func testS3SharedConfigProfile(t *testing.T, srv *s3test.Server) {
	srv.Put(t, "p/a.bin", []byte("profile"))
	srv.Env(t, "")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	creds := filepath.Join(dir, "credentials")
	os.WriteFile(cfg, []byte("[profile shards]\nregion = us-east-1\nendpoint_url = "+srv.Endpoint+"\n"), 0o600)
	os.WriteFile(creds, []byte("[shards]\naws_access_key_id = "+srv.AccessKey+"\naws_secret_access_key = "+srv.SecretKey+"\n"), 0o600)
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("AWS_CONFIG_FILE", cfg)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	t.Setenv("AWS_PROFILE", "shards")
	b, names, err := objstore.Resolve(context.Background(), srv.URL("p/a.bin"), fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, _ := objstore.NewShardCache(b, nil)
	defer c.Close()
	readAll(t, c, names, map[string][]byte{"a.bin": []byte("profile")})
}

// TestStalledBodyIsAbandoned: a connection that stops sending in mid-body is given up
// after AttemptTimeout and the download resumes where it stopped.
func TestStalledBodyIsAbandoned(t *testing.T) {
	data := shards(4, 200<<10, 300<<10, 6)
	dir := t.TempDir()
	for n, d := range data {
		os.WriteFile(filepath.Join(dir, n), d, 0o644)
	}
	hs := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer hs.Close()
	p := s3test.NewProxy(t, hs.URL, s3test.Faults{Stall: 2})
	opts := *fastRetry
	opts.Retry.AttemptTimeout = 200 * time.Millisecond
	b, names, err := objstore.Resolve(context.Background(), p.URL+"/s-{000..003}.bin", &opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, _ := objstore.NewShardCache(b, nil)
	defer c.Close()
	start := time.Now()
	readAll(t, c, names, data)
	st := c.Stats()
	// Each stall costs a retry; a loaded machine may add a timeout of its own (the
	// 200 ms is also the response-header timeout), so only the lower bound is certain.
	if stalls := p.Counts()["stall"]; stalls == 0 || st.Retries < int64(stalls) {
		t.Errorf("%d stalls, %d retries", stalls, st.Retries)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("took %v: stalls not abandoned", el)
	}
}

// TestS3MultipartResume: Put finds a multipart upload left unfinished by an earlier run
// and sends only the parts it lacks.
func TestS3MultipartResume(t *testing.T) { s3test.Each(t, testS3MultipartResume) }

func testS3MultipartResume(t *testing.T, srv *s3test.Server) {
	srv.Env(t, "")
	ctx := context.Background()
	const part = 5 << 20
	big := make([]byte, 2*part+12345)
	for i := range big {
		big[i] = byte(i * 7 / 5)
	}
	// An earlier run: the upload created and its first part sent, then it died.
	client := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, "")})
	key := "conv/shard-000.bin"
	up, err := client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &srv.Bucket, Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.UploadPart(ctx, &s3.UploadPartInput{Bucket: &srv.Bucket, Key: &key, UploadId: up.UploadId,
		PartNumber: aws.Int32(1), Body: bytes.NewReader(big[:part]), ContentLength: aws.Int64(part)}); err != nil {
		t.Fatal(err)
	}
	opts := *fastRetry
	opts.PartSize = part
	b, err := objstore.OpenBucket(ctx, srv.URL("conv/"), &opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Put(ctx, "shard-000.bin", bytes.NewReader(big), int64(len(big))); err != nil {
		t.Fatal(err)
	}
	if got := srv.Get(t, key); !bytes.Equal(got, big) {
		t.Fatalf("stored %d bytes, want the %d put", len(got), len(big))
	}
	if st := b.Stats(); st.BytesUploaded != int64(len(big))-part {
		t.Errorf("uploaded %d bytes, want %d: the finished part sent again?", st.BytesUploaded, len(big)-part)
	}
	// Stat without fetching.
	c, _ := objstore.NewShardCache(b, nil)
	defer c.Close()
	fi, err := fs.Stat(c, "shard-000.bin")
	if err != nil || fi.Size() != int64(len(big)) || fi.Name() != "shard-000.bin" {
		t.Errorf("Stat = %v, %v", fi, err)
	}
	if st := c.Stats(); st.Fetched != 0 || st.BytesFetched != 0 {
		t.Errorf("Stat fetched: %+v", st)
	}
}

func TestOpenDataset(t *testing.T) {
	data := shards(3, 10, 20, 7)
	dir := t.TempDir()
	for n, d := range data {
		os.WriteFile(filepath.Join(dir, n), d, 0o644)
	}
	ctx := context.Background()
	// Local: read in place, no cache.
	d, err := objstore.OpenShards(ctx, dir+"/s-*.bin", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Cache != nil || !reflect.DeepEqual(d.Names, sortedNames(data)) {
		t.Errorf("local dataset: cache %v, names %q", d.Cache, d.Names)
	}
	for _, n := range d.Names {
		if got, err := fs.ReadFile(d.FS, n); err != nil || !bytes.Equal(got, data[n]) {
			t.Errorf("%s: %v", n, err)
		}
	}
	d.Close()
	// Remote (HTTP): through a cache.
	hs := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer hs.Close()
	d, err = objstore.OpenShards(ctx, hs.URL+"/s-{000..002}.bin", fastRetry, &objstore.ShardCacheOptions{Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.Prefetch(d.Names...)
	for _, n := range d.Names {
		if got, err := fs.ReadFile(d.FS, n); err != nil || !bytes.Equal(got, data[n]) {
			t.Errorf("%s: %v", n, err)
		}
	}
	if st := d.Stats(); st.Fetched != 3 || !strings.Contains(st.String(), "3 fetched") {
		t.Errorf("stats %v", st)
	}
}

// benchShards reads n shards of size bytes through a fresh cache per iteration and
// reports MB/s and requests per shard.
func benchShards(b *testing.B, spec func(b *testing.B, data map[string][]byte) string, n, size int) {
	data := shards(n, size, size+1, 9)
	url := spec(b, data)
	var total int64
	for _, d := range data {
		total += int64(len(d))
	}
	b.SetBytes(total)
	b.ResetTimer()
	for range b.N {
		d, err := objstore.OpenShards(context.Background(), url, nil, &objstore.ShardCacheOptions{Concurrency: 4})
		if err != nil {
			b.Fatal(err)
		}
		d.Prefetch(d.Names...)
		for _, name := range d.Names {
			f, err := d.FS.Open(name)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, f)
			f.Close()
			d.Release(name)
		}
		d.Close()
	}
}

func localSpec(b *testing.B, data map[string][]byte) string {
	dir := b.TempDir()
	for n, d := range data {
		os.WriteFile(filepath.Join(dir, n), d, 0o644)
	}
	return dir + "/s-*.bin"
}

func s3Spec(latency time.Duration) func(*testing.B, map[string][]byte) string {
	return func(b *testing.B, data map[string][]byte) string {
		srv := s3test.Start(b)
		for n, d := range data {
			srv.Put(b, "bench/"+n, d)
		}
		endpoint := srv.Endpoint
		if latency > 0 {
			endpoint = s3test.NewProxy(b, srv.Endpoint, s3test.Faults{Latency: latency}).URL
		}
		srv.Env(b, endpoint)
		return srv.URL("bench/s-*.bin")
	}
}

func BenchmarkShards4MiBLocal(b *testing.B) { benchShards(b, localSpec, 32, 4<<20) }
func BenchmarkShards4MiBS3(b *testing.B)    { benchShards(b, s3Spec(0), 32, 4<<20) }
func BenchmarkShards4MiBS3Latency20(b *testing.B) {
	benchShards(b, s3Spec(20*time.Millisecond), 32, 4<<20)
}

// Delete removes objects (an absent one is no error) in S3 and on local disk; Uploads
// lists an unfinished multipart upload under the root, by name, and AbortUpload ends it;
// HTTP buckets refuse to delete.
func TestDeleteAndUploads(t *testing.T) { s3test.Each(t, testDeleteAndUploads) }

func testDeleteAndUploads(t *testing.T, srv *s3test.Server) {
	srv.Env(t, "")
	ctx := context.Background()
	local := t.TempDir()
	for _, root := range []string{srv.URL("del/"), local + "/"} {
		b, err := objstore.OpenBucket(ctx, root, fastRetry)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		for _, n := range []string{"a.shard", "b.shard"} {
			if err := b.Put(ctx, n, bytes.NewReader([]byte(n)), int64(len(n))); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Delete(ctx, "a.shard"); err != nil {
			t.Fatalf("%s: Delete: %v", root, err)
		}
		if err := b.Delete(ctx, "never.shard"); err != nil {
			t.Errorf("%s: Delete of an absent object: %v", root, err)
		}
		objs, err := b.List(ctx, "")
		if err != nil || len(objs) != 1 || objs[0].Name != "b.shard" {
			t.Errorf("%s: after Delete: %v %v", root, objs, err)
		}
	}
	srv.StartUpload(t, "del/half.shard", []byte("part one"))
	srv.StartUpload(t, "elsewhere/x.shard", []byte("not under the root"))
	b, err := objstore.OpenBucket(ctx, srv.URL("del/"), fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ups, err := b.Uploads(ctx, "")
	if err != nil || len(ups) != 1 || ups[0].Name != "half.shard" || ups[0].ID == "" {
		t.Fatalf("Uploads: %+v %v", ups, err)
	}
	if err := b.AbortUpload(ctx, ups[0]); err != nil {
		t.Fatal(err)
	}
	if ups, err := b.Uploads(ctx, ""); err != nil || len(ups) != 0 {
		t.Errorf("after AbortUpload: %+v %v", ups, err)
	}
	lb, _ := objstore.OpenBucket(ctx, local+"/", nil)
	if ups, err := lb.Uploads(ctx, ""); err != nil || ups != nil {
		t.Errorf("a local bucket's uploads: %v %v", ups, err)
	}
	hb, err := objstore.OpenBucket(ctx, "https://example.invalid/x/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := hb.Delete(ctx, "a"); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("HTTP Delete: %v", err)
	}
}

// A store that answers the listing of multipart uploads with 404 NoSuchUpload (gofakes3,
// in a bucket without uploads) has none: Uploads says so with ErrNoUploadList, and Put
// starts a multipart upload rather than failing to look for one to resume.
func TestS3NoUploadList(t *testing.T) { s3test.Each(t, testS3NoUploadList) }

func testS3NoUploadList(t *testing.T, srv *s3test.Server) {
	p := s3test.NewProxy(t, srv.Endpoint, s3test.Faults{NoUploadList: true})
	srv.Env(t, p.URL)
	ctx := context.Background()
	opts := *fastRetry
	opts.PartSize = 5 << 20
	b, err := objstore.OpenBucket(ctx, srv.URL("nolist/"), &opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	big := bytes.Repeat([]byte("0123456789abcdef"), int(opts.PartSize+1000)/16)
	if err := b.Put(ctx, "big.shard", bytes.NewReader(big), int64(len(big))); err != nil {
		t.Fatalf("Put as a multipart upload: %v", err)
	}
	if got := srv.Get(t, "nolist/big.shard"); !bytes.Equal(got, big) {
		t.Fatalf("stored %d bytes, want %d", len(got), len(big))
	}
	ups, err := b.Uploads(ctx, "")
	if !errors.Is(err, objstore.ErrNoUploadList) || ups != nil || !strings.Contains(err.Error(), srv.URL("nolist/")) {
		t.Fatalf("Uploads: %v %v, want ErrNoUploadList naming the URL", ups, err)
	}
	if n := p.Counts()["nouploadlist"]; n != 2 {
		t.Errorf("%d listings of uploads answered 404, want 2 (Put's and Uploads')", n)
	}
}

// Done marks an object as read to its end for now: the first to evict. Read again
// later (the next epoch, opened without a Prefetch: a plan with no room to fetch
// ahead), it was still evicted first while being read, before objects used less
// recently — most recently used first, each epoch after the first.
func TestCacheDoneThenReadAgain(t *testing.T) {
	data := shards(4, 100<<10, 100<<10+1, 5)
	b := localBucket(t, data)
	c, err := objstore.NewShardCache(b, &objstore.ShardCacheOptions{Dir: t.TempDir(), MaxBytes: 350 << 10, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	names := sortedNames(data)
	a, bb, cc, d := names[0], names[1], names[2], names[3]
	read := func(n string) {
		t.Helper()
		f, err := c.Open(n)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, f)
		f.Close()
	}
	// Epoch 1: a's last sample is opened after Done, as the planner calls it.
	read(a)
	c.Done(a)
	read(a)
	// Epoch 2: b, c, then a, which is now the most recently used.
	read(bb)
	read(cc)
	read(a)
	read(d) // room for d: the least recently used, b, goes
	before := c.Stats()
	read(a)
	if st := c.Stats(); st.Misses != before.Misses {
		t.Errorf("a, the most recently used, was evicted for d (stats %+v)", st)
	}
}
