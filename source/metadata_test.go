package source

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/s3test"
	"github.com/conveyor-ml/conveyor/internal/treetest"
	"github.com/conveyor-ml/conveyor/objstore"
)

// partedDataset converts a small tree in two parts into a new directory and returns it.
func partedDataset(t *testing.T) string {
	t.Helper()
	src, err := Dir(treetest.New(t, 2, 6), nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	for i := range 2 {
		if _, err := convertPart(t, src, dst, cache.Part{Index: i, Count: 2}); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// endlessServer serves dir over HTTP, but the file named endless as a body of unknown
// length that never ends, and counts the requests.
func endlessServer(t *testing.T, dir, endless string, requests *atomic.Int64) *httptest.Server {
	files := http.FileServer(http.Dir(dir))
	chunk := make([]byte, 64<<10)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.Method != http.MethodGet || r.URL.Path != "/"+endless {
			files.ServeHTTP(w, r)
			return
		}
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(hs.Close)
	return hs
}

// A web server that streams a converted dataset's dataset.json, a part record or an
// index without end (one filled 10 GB of disk in 20 s) fails the open at once, with an
// error naming the URL and saying the file is too large, and leaves nothing in the
// cache directory; each file is capped at what it may hold (cache.MaxInfoBytes, an
// index's recorded size).
func TestConvertedHTTPEndlessFiles(t *testing.T) {
	dir := partedDataset(t)
	info, err := cache.ReadInfo(dir)
	if err != nil || info.Parts != 2 || len(info.Shards) == 0 {
		t.Fatalf("%+v, %v", info, err)
	}
	idx := strings.TrimSuffix(info.Shards[0].Name, ".shard") + ".idx"
	ctx := context.Background()
	for _, endless := range []string{"", cache.InfoName, cache.Part{Index: 1, Count: 2}.PartInfoName(), idx} {
		t.Run(cmp.Or(endless, "none"), func(t *testing.T) {
			var requests atomic.Int64
			hs := endlessServer(t, dir, endless, &requests)
			cacheDir := t.TempDir()
			start := time.Now()
			d, err := Open(ctx, hs.URL+"/", &OpenOptions{Store: fastStore, Cache: &objstore.ShardCacheOptions{Dir: cacheDir}, Converted: &ConvertedOptions{Logf: quiet}})
			if endless == "" {
				if err != nil {
					t.Fatal(err)
				}
				if d.Source.Len() != 12 {
					t.Errorf("%d samples, want 12", d.Source.Len())
				}
				d.Close()
				return
			}
			if !errors.Is(err, objstore.ErrTooLarge) || !strings.Contains(err.Error(), hs.URL+"/"+endless) {
				t.Fatalf("open: %v; want ErrTooLarge naming %s", err, hs.URL+"/"+endless)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("refused after %v", d)
			}
			t.Log(err)
			if left, _ := os.ReadDir(cacheDir); len(left) != 0 {
				t.Errorf("left %d files in the cache directory", len(left))
			}
		})
	}
}

// A dataset.json naming 2e9 parts is refused at once, naming its URL, without asking
// for a part record: it once made opening fetch (or open, locally) 2e9 files. One of
// 5000 parts, none run, is refused naming a few of them.
func TestConvertedTooManyParts(t *testing.T) {
	dir := t.TempDir()
	js := fmt.Sprintf(`{"version": 3, "format_version": %d, "spec": "x", "codec": "s2", "parts": 2000000000}`, cache.FormatVersion)
	if err := os.WriteFile(filepath.Join(dir, cache.InfoName), []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	const want = "2000000000 parts, more than the 1048576"
	if _, err := OpenConverted(dir, &ConvertedOptions{Logf: quiet}); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), filepath.Join(dir, cache.InfoName)) {
		t.Errorf("local: %v", err)
	}
	// Many parts, none run: the error names a few, not each.
	js = fmt.Sprintf(`{"version": 3, "format_version": %d, "spec": "x", "codec": "s2", "parts": 5000}`, cache.FormatVersion)
	many := t.TempDir()
	if err := os.WriteFile(filepath.Join(many, cache.InfoName), []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := OpenConverted(many, &ConvertedOptions{Logf: quiet})
	if !errors.Is(err, ErrIncomplete) || len(err.Error()) > 4096 || !strings.Contains(err.Error(), "--part 0/5000, ") || !strings.Contains(err.Error(), "and the 4992 other unfinished parts") {
		t.Errorf("5000 parts, none run: %.5000v", err)
	}

	var requests atomic.Int64
	hs := endlessServer(t, dir, "", &requests)
	_, err = Open(context.Background(), hs.URL+"/", &OpenOptions{Store: fastStore, Cache: &objstore.ShardCacheOptions{Dir: t.TempDir()}, Converted: &ConvertedOptions{Logf: quiet}})
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), hs.URL+"/"+cache.InfoName) {
		t.Errorf("over HTTP: %v", err)
	}
	if n := requests.Load(); n > 2 {
		t.Errorf("%d requests; want a HEAD and a GET of %s", n, cache.InfoName)
	}
}

// A converted dataset served over HTTP (which cannot be listed) whose dataset.json
// names many parts, few of them finished, is refused as unfinished after a bounded
// number of part records turn out absent, not asked for each (up to 1,048,576 GETs).
func TestConvertedHTTPManyPartsAbsent(t *testing.T) {
	dir := t.TempDir()
	const parts = 20000
	js := fmt.Sprintf(`{"version": 3, "format_version": %d, "spec": "x", "codec": "s2", "parts": %d}`, cache.FormatVersion, parts)
	if err := os.WriteFile(filepath.Join(dir, cache.InfoName), []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int64
	hs := endlessServer(t, dir, "", &requests)
	_, err := Open(context.Background(), hs.URL+"/", &OpenOptions{Store: fastStore, Cache: &objstore.ShardCacheOptions{Dir: t.TempDir()}, Converted: &ConvertedOptions{Logf: quiet}})
	if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), hs.URL) || !strings.Contains(err.Error(), "part records") {
		t.Errorf("over HTTP, %d parts none run: %v", parts, err)
	}
	if n := requests.Load(); n > 2*maxAbsentRecords {
		t.Errorf("%d requests for a dataset of %d parts none run; want at most about %d", n, parts, maxAbsentRecords)
	}
}

// Opening a converted dataset in S3 fetches its dataset.json, part records and indexes
// and nothing else under its prefix: an unrelated object beside it was fetched too, at
// every open, outside the shard cache's limit.
func TestConvertedS3FetchesItsFilesOnly(t *testing.T) {
	s3test.Each(t, testConvertedS3FetchesItsFilesOnly)
}

func testConvertedS3FetchesItsFilesOnly(t *testing.T, srv *s3test.Server) {
	srv.Env(t, "")
	dir := partedDataset(t)
	uploadConverted(t, srv, dir, "conv/")
	const unrelated = 4 << 20
	srv.Put(t, "conv/unrelated.bin", make([]byte, unrelated))
	srv.Put(t, "conv/notes.json", []byte(`{}`))
	ctx := context.Background()
	b, err := objstore.OpenBucket(ctx, srv.URL("conv/"), fastStore)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fetched := t.TempDir()
	if err := FetchConvertedIndex(ctx, b, fetched, 2); err != nil {
		t.Fatal(err)
	}
	var want, got []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if n := e.Name(); n == cache.InfoName || strings.HasPrefix(n, "dataset.part-") || strings.HasSuffix(n, ".idx") {
			want = append(want, n)
		}
	}
	ents, _ = os.ReadDir(fetched)
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, want) {
		t.Errorf("fetched %q; want %q", got, want)
	}
	if st := b.Stats(); st.BytesFetched >= unrelated {
		t.Errorf("fetched %d bytes", st.BytesFetched)
	}
	d, err := Open(ctx, srv.URL("conv/"), &OpenOptions{Store: fastStore, Cache: &objstore.ShardCacheOptions{Dir: t.TempDir()}, Converted: &ConvertedOptions{Logf: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if st := d.Stats(); d.Source.Len() != 12 || st.BytesFetched >= unrelated {
		t.Errorf("%d samples, %v", d.Source.Len(), st)
	}
}

// A dataset without class names, whose record carries a label of 2^31-1, is refused
// naming the record, rather than making 2^31 class names.
func TestConvertedHugeLabel(t *testing.T) {
	dir := t.TempDir()
	c, err := cache.Open(dir, &cache.Options{Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	d := c.NewCoder()
	const spec = "huge-label"
	img := &decode.Image{Width: 4, Height: 4, Stride: 12, Pix: make([]byte, 48)}
	if err := d.Put(cache.Key{Spec: spec, Path: "a/x.jpg", Size: 1}, 1<<31-1, img); err != nil {
		t.Fatal(err)
	}
	d.Close()
	m, err := c.Manifest(spec)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	info := &cache.Info{Version: cache.WholeInfoVersion, FormatVersion: cache.FormatVersion, Spec: spec, Codec: cache.S2, Samples: 1, Stored: 1, Complete: true, Shards: m}
	if err := cache.WriteInfo(dir, info); err != nil {
		t.Fatal(err)
	}
	_, err = OpenConverted(dir, &ConvertedOptions{Logf: quiet})
	if err == nil || !strings.Contains(err.Error(), "label 2147483647 of a/x.jpg") {
		t.Errorf("open: %v", err)
	}
}
