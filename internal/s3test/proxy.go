package s3test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Faults says what a [Proxy] does to the requests it forwards. The schedule is counted
// over GET responses that carry a body, so a run's faults are the same every time: the
// n-th such response (from 1) gets the first fault whose period divides n.
type Faults struct {
	// Latency is added before every request is forwarded.
	Latency time.Duration
	// SlowDown answers every SlowDown-th GET with 503 SlowDown instead of forwarding it.
	SlowDown int
	// Reset sends every Reset-th GET's headers and half its body, then resets the
	// connection (TCP RST).
	Reset int
	// Truncate sends every Truncate-th GET's headers and half its body, then closes the
	// connection cleanly: the body is shorter than its Content-Length.
	Truncate int
	// Short sends every Short-th GET's first half with Content-Length saying that is
	// all: only a checksum or a size check can tell.
	Short int
	// Stall sends every Stall-th GET's headers and half its body, then sends nothing
	// more until the client gives up (or 30 s pass).
	Stall int
	// Corrupt sends every Corrupt-th GET whole but with its middle byte changed: only
	// a checksum can tell.
	Corrupt int
	// NoUploadList answers every listing of multipart uploads (GET ?uploads) with
	// 404 NoSuchUpload, as gofakes3 does in a bucket without uploads.
	NoUploadList bool
}

// A Proxy is a fault-injecting reverse proxy in front of one HTTP server (S3 or not).
// It forwards requests as they are, Host header included, so S3 signatures stay valid.
//
// With Latency alone it relays TCP connections rather than HTTP requests, so that
// simulating a distant store costs little CPU on the machine it measures (an HTTP
// proxy's copies through small buffers cost more CPU than the store itself): each
// request waits Latency before its first bytes are passed on, a request being what the
// client sends after the server last answered on that connection (HTTP/1.1 without
// pipelining, as the clients here use it; an upload that waits for "100 Continue" waits
// twice).
type Proxy struct {
	URL    string
	faults Faults
	target string
	client *http.Client
	srv    *httptest.Server
	ln     net.Listener // TCP mode

	gets   atomic.Int64
	mu     sync.Mutex
	counts map[string]int
}

// NewProxy starts a proxy to target (http://host:port) and closes it when the test ends.
func NewProxy(t testing.TB, target string, f Faults) *Proxy {
	p := &Proxy{faults: f, target: target, counts: map[string]int{},
		client: &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64}}}
	if (f == Faults{Latency: f.Latency}) && f.Latency > 0 {
		p.startTCP(t)
		return p
	}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.srv.URL
	t.Cleanup(func() {
		p.srv.CloseClientConnections()
		p.srv.Close()
		p.client.CloseIdleConnections()
	})
	return p
}

// Counts returns how many times each fault was injected, by name.
func (p *Proxy) Counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

func (p *Proxy) count(name string) {
	p.mu.Lock()
	p.counts[name]++
	p.mu.Unlock()
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	if p.faults.Latency > 0 {
		time.Sleep(p.faults.Latency)
	}
	if _, ok := r.URL.Query()["uploads"]; ok && p.faults.NoUploadList && r.Method == http.MethodGet {
		p.count("nouploadlist")
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchUpload</Code><Message>The specified upload does not exist.</Message></Error>`)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	out.Host = r.Host
	out.ContentLength = r.ContentLength
	resp, err := p.client.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()

	fault := ""
	if r.Method == http.MethodGet && (resp.StatusCode == 200 || resp.StatusCode == 206) && resp.ContentLength >= 2 {
		n := p.gets.Add(1)
		f := p.faults
		switch {
		case f.SlowDown > 0 && n%int64(f.SlowDown) == 0:
			fault = "slowdown"
		case f.Reset > 0 && n%int64(f.Reset) == 0:
			fault = "reset"
		case f.Truncate > 0 && n%int64(f.Truncate) == 0:
			fault = "truncate"
		case f.Short > 0 && n%int64(f.Short) == 0:
			fault = "short"
		case f.Stall > 0 && n%int64(f.Stall) == 0:
			fault = "stall"
		case f.Corrupt > 0 && n%int64(f.Corrupt) == 0:
			fault = "corrupt"
		}
	}
	if fault != "" {
		p.count(fault)
	}
	switch fault {
	case "slowdown":
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
	case "reset", "truncate":
		p.breakBody(w, resp, fault == "reset")
	case "short":
		half := resp.ContentLength / 2
		copyHeader(w.Header(), resp.Header)
		w.Header().Set("Content-Length", strconv.FormatInt(half, 10))
		if cr := resp.Header.Get("Content-Range"); cr != "" {
			// Keep ranged answers self-consistent: bytes START-(START+half-1)/TOTAL.
			var a, b, total int64
			if _, err := fmt.Sscanf(cr, "bytes %d-%d/%d", &a, &b, &total); err == nil {
				w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a, a+half-1, total))
			}
		}
		w.WriteHeader(resp.StatusCode)
		io.CopyN(w, resp.Body, half)
	case "stall":
		copyHeader(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		io.CopyN(w, resp.Body, resp.ContentLength/2)
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	case "corrupt":
		copyHeader(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		half := resp.ContentLength / 2
		io.CopyN(w, resp.Body, half)
		var b [1]byte
		if _, err := io.ReadFull(resp.Body, b[:]); err == nil {
			b[0] ^= 0x5a
			w.Write(b[:])
		}
		io.Copy(w, resp.Body)
	default:
		copyHeader(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}
}

// breakBody writes the response's headers and half its body on the raw connection,
// then closes it, with a reset when rst is set.
func (p *Proxy) breakBody(w http.ResponseWriter, resp *http.Response, rst bool) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "cannot hijack", http.StatusInternalServerError)
		return
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	bw := bufio.NewWriter(conn)
	fmt.Fprintf(bw, "HTTP/1.1 %d %s\r\n", resp.StatusCode, http.StatusText(resp.StatusCode))
	h := resp.Header.Clone()
	h.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	h.Del("Transfer-Encoding")
	h.Write(bw)
	bw.WriteString("\r\n")
	io.CopyN(bw, resp.Body, resp.ContentLength/2)
	bw.Flush()
	_ = buf
	if tc, ok := conn.(*net.TCPConn); ok && rst {
		tc.SetLinger(0)
	}
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		for _, v := range vs {
			dst.Add(k, v)
		}
	}
}

// startTCP relays connections to the target, delaying each request by Latency.
func (p *Proxy) startTCP(t testing.TB) {
	u, err := url.Parse(p.target)
	if err != nil {
		t.Fatalf("s3test: proxy target %q: %v", p.target, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("s3test: proxy: %v", err)
	}
	p.ln, p.URL = ln, "http://"+ln.Addr().String()
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	track := func(c net.Conn, on bool) {
		mu.Lock()
		defer mu.Unlock()
		if on {
			conns[c] = true
		} else {
			delete(conns, c)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				track(c, true)
				defer track(c, false)
				p.relay(c, u.Host)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
}

// relay passes one connection's bytes both ways, holding back each request's first
// bytes for Latency: those the client sends after the server last answered.
func (p *Proxy) relay(c net.Conn, host string) {
	defer c.Close()
	s, err := net.Dial("tcp", host)
	if err != nil {
		return
	}
	defer s.Close()
	var answered atomic.Bool
	answered.Store(true) // the first request waits too
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 256<<10)
		for {
			n, err := s.Read(buf)
			if n > 0 {
				answered.Store(true)
				if _, werr := c.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		c.Close()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if answered.Swap(false) {
				time.Sleep(p.faults.Latency)
			}
			if _, werr := s.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	s.Close()
	<-done
}
