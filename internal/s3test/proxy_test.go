package s3test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// With Latency alone the proxy relays TCP: every request on a kept-alive connection
// waits Latency, and bodies pass through unchanged both ways.
func TestProxyLatencyTCP(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 100000)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPut && !bytes.Equal(in, body) {
			http.Error(w, "body changed", http.StatusBadRequest)
			return
		}
		w.Write(body)
	}))
	defer hs.Close()
	const latency = 30 * time.Millisecond
	p := NewProxy(t, hs.URL, Faults{Latency: latency})
	if p.ln == nil {
		t.Fatal("latency alone did not start the TCP relay")
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	const n = 4
	t0 := time.Now()
	for i := range n {
		method, in := http.MethodGet, io.Reader(nil)
		if i%2 == 1 {
			method, in = http.MethodPut, bytes.NewReader(body)
		}
		req, _ := http.NewRequest(method, p.URL+"/x", in)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, body) {
			t.Fatalf("request %d: %d, %d bytes, %v", i, resp.StatusCode, len(got), err)
		}
	}
	if d := time.Since(t0); d < n*latency {
		t.Errorf("%d requests took %v, want at least %v", n, d, n*latency)
	}
}
