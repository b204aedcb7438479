package objstore_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/objstore"
)

// Mirror downloads each object up to its Size: a body of unknown length that streams
// without end (a server filled 10 GB of disk in 20 s with one dataset.json) and one that
// says it is larger are refused with ErrTooLarge naming the URL, at once, leaving
// nothing in the directory; one within its limit is kept.
func TestMirrorLimit(t *testing.T) {
	var served atomic.Int64
	chunk := make([]byte, 32<<10)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/endless.json": // chunked, without end
			for r.Context().Err() == nil {
				n, err := w.Write(chunk)
				served.Add(int64(n))
				if err != nil {
					return
				}
			}
		case "/big.json":
			w.Header().Set("Content-Length", strconv.Itoa(1<<20))
			w.WriteHeader(http.StatusOK)
			n, _ := w.Write(make([]byte, 1<<20))
			served.Add(int64(n))
		case "/small.json":
			w.Write([]byte(`{"ok": true}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer hs.Close()
	ctx := context.Background()
	b, err := objstore.OpenBucket(ctx, hs.URL+"/", fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const limit = 256 << 10
	for _, name := range []string{"endless.json", "big.json"} {
		dir := t.TempDir()
		start := time.Now()
		err := objstore.Mirror(ctx, b, []objstore.Object{{Name: name, Size: limit}}, dir, 1)
		if !errors.Is(err, objstore.ErrTooLarge) || !strings.Contains(err.Error(), b.URL(name)) || !strings.Contains(err.Error(), "the 256 KiB it may hold") {
			t.Errorf("%s: %v; want ErrTooLarge naming the URL and the limit", name, err)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%s: refused after %v", name, d)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("%s: left %d files behind", name, len(left))
		}
	}
	if n := served.Load(); n > 16<<20 {
		t.Errorf("the server wrote %d bytes for downloads of at most %d", n, limit)
	}
	dir := t.TempDir()
	if err := objstore.Mirror(ctx, b, []objstore.Object{{Name: "small.json", Size: limit}}, dir, 1); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(dir + "/small.json"); err != nil || string(got) != `{"ok": true}` {
		t.Errorf("small.json: %q, %v", got, err)
	}
}
