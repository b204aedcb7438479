package source

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/objstore"
)

// hangingServer answers no request until the client goes away or the test ends.
func hangingServer(t *testing.T) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(release) }) // runs first
	return hs
}

// Open honours its context's deadline on every path that waits for the store,
// the eager WebDataset index included (it waited for every shard on a context of its
// own): against a server that never answers, it returns soon after the deadline with
// an error naming the URL and wrapping context.DeadlineExceeded, long before the
// store's own AttemptTimeout (60 s by default) would end an attempt.
func TestOpenDatasetDeadline(t *testing.T) {
	hs := hangingServer(t)
	for _, url := range []string{
		hs.URL + "/train-{000..003}.tar", // WebDataset shards, indexed before Open returns
		hs.URL + "/train.json",           // a shard index
		hs.URL + "/converted/",           // a converted dataset over HTTP (its dataset.json)
	} {
		t.Run(url[len(hs.URL):], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			type result struct {
				d   *Dataset
				err error
			}
			done := make(chan result, 1)
			start := time.Now()
			go func() {
				d, err := Open(ctx, url, &OpenOptions{Cache: &objstore.ShardCacheOptions{Dir: t.TempDir()}})
				done <- result{d, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("Open with a 1 s deadline still running after 20 s")
			}
			el := time.Since(start)
			t.Logf("%v after %v", r.err, el.Round(time.Millisecond))
			if r.d != nil {
				r.d.Close()
			}
			if !errors.Is(r.err, context.DeadlineExceeded) || !strings.Contains(r.err.Error(), hs.URL+"/") {
				t.Errorf("error %v, want one naming %s and wrapping context.DeadlineExceeded", r.err, hs.URL)
			}
			// The deadline plus closing the shard cache; generous for a loaded machine.
			if el > 5*time.Second {
				t.Errorf("returned %v after a 1 s deadline", el)
			}
		})
	}
}
