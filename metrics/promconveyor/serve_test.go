package promconveyor_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/metrics/promconveyor"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// get fetches url with a client that keeps no connection open afterwards.
func get(url string) (string, error) {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestServe(t *testing.T) {
	src := &fake{st: pipeline.Stats{Batches: 7}}
	srv, err := promconveyor.Serve("127.0.0.1:0", src, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := get("http://" + srv.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nconveyor_loader_batches_total 7\n", "\ngo_goroutines "} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in the metrics served", strings.TrimSpace(want))
		}
	}

	// The address in use: an error naming it.
	if _, err := promconveyor.Serve(srv.Addr(), src, nil); err == nil || !strings.Contains(err.Error(), srv.Addr()) {
		t.Errorf("serving twice at %s: %v", srv.Addr(), err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := get("http://" + srv.Addr() + "/metrics"); err == nil {
		t.Error("still serving after Close")
	}
}
