// Package metrics exports a pipeline.Loader's health for training jobs to scrape or log.
//
// Snap turns one pipeline.Stats snapshot into a Snapshot, a plain struct whose JSON form
// has stable snake_case keys and durations in float seconds; a job can log it, and a
// command such as `conveyor bench --json` can print it. Publish makes the same object an
// expvar variable, computed from a fresh snapshot each time /debug/vars is read:
//
//	ld, err := pipeline.New(src, cfg)
//	...
//	if err := metrics.Publish("conveyor_train", ld); err != nil { ... }
//	// expvar serves it, with memstats and cmdline, at /debug/vars on http.DefaultServeMux.
//
// Package promconveyor exports the same counters to Prometheus. This package needs only
// the standard library, so importing it adds no dependencies to a training binary.
package metrics
