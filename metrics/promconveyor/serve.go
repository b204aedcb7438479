package promconveyor

import (
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/conveyor-ml/conveyor/metrics"
)

// Server serves a loader's metrics over HTTP for Prometheus to scrape: the one line a
// training program needs,
//
//	srv, err := promconveyor.Serve(":9100", ld, nil)
//	if err != nil { ... }
//	defer srv.Close()
//
// where NewCollector and a handler of one's own would otherwise take a dozen.
type Server struct {
	reg  *prometheus.Registry
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
}

// Serve serves the metrics of s (usually a *pipeline.Loader; o as for NewCollector),
// with the Go runtime's (go_*) and the process's (process_*, on Linux), at
// http://addr/metrics until Close. It listens before it returns, so an address in use is
// its error, and addr ":0" or "127.0.0.1:0" takes a free port (Addr says which).
// Register adds collectors, such as a ShardCollector for a dataset in object storage.
func Serve(addr string, s metrics.Source, o *Options) (*Server, error) {
	c, err := NewCollector(s, o)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	// Registering these in a new registry cannot collide.
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("promconveyor: serving metrics at %q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &Server{reg: reg, ln: ln, srv: &http.Server{Handler: mux}, done: make(chan struct{})}
	go func() {
		defer close(srv.done)
		srv.srv.Serve(ln) // returns http.ErrServerClosed at Close
	}()
	return srv, nil
}

// Addr is the address the server listens on, its port chosen when Serve's had none:
// "127.0.0.1:41234". The metrics are at http://Addr()/metrics.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Register adds a collector to those served, for example a ShardCollector:
//
//	sc, err := promconveyor.NewShardCollector(ds, nil)
//	...
//	err = srv.Register(sc)
func (s *Server) Register(c prometheus.Collector) error { return s.reg.Register(c) }

// Close stops serving: it closes the listener and any open connection, and returns once
// the server's goroutine has ended.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
