// Package promconveyor exports a pipeline.Loader's counters to Prometheus.
//
// NewCollector returns a prometheus.Collector that takes one pipeline.Stats snapshot per
// scrape and reports it as constant metrics, so the loader's hot path pays nothing for
// being watched:
//
//	c, err := promconveyor.NewCollector(ld, &promconveyor.Options{
//		ConstLabels: prometheus.Labels{"loader": "train"},
//	})
//	...
//	reg.MustRegister(c)
//
// Serve does the rest too, in one line: it registers the Collector with the Go runtime's
// and the process's collectors in a registry of its own and serves them at
// http://ADDR/metrics until Close:
//
//	srv, err := promconveyor.Serve(":9100", ld, nil)
//	...
//	defer srv.Close()
//
// Loader metrics are named conveyor_loader_*, and those of the loader's cache, if it has
// one, conveyor_cache_*. Counters end in _total; times are in seconds and sizes in bytes.
// Useful expressions:
//
//	rate(conveyor_loader_wait_seconds_total[5m])               fraction of time training starved
//	rate(conveyor_loader_stage_items_total{stage="pack"}[5m])  samples per second
//	rate(conveyor_loader_stage_busy_seconds_total[5m])         busy goroutines, by stage
//
// The package is named for what it joins, Prometheus and conveyor, rather than
// "prometheus", so that it and the client library it is used with
// (github.com/prometheus/client_golang/prometheus) can be imported side by side without
// renaming either. Only this package imports the client library: a training binary that
// does not import it links none of it.
package promconveyor
