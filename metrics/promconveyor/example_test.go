package promconveyor_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/conveyor-ml/conveyor/source"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/conveyor-ml/conveyor/internal/synth"
	"github.com/conveyor-ml/conveyor/metrics/promconveyor"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// A training job registers one Collector per loader and serves the registry.
func ExampleNewCollector() {
	var train, eval *pipeline.Loader // from pipeline.New(src, cfg)

	reg := prometheus.NewRegistry()
	for name, ld := range map[string]*pipeline.Loader{"train": train, "eval": eval} {
		c, err := promconveyor.NewCollector(ld, &promconveyor.Options{
			ConstLabels: prometheus.Labels{"loader": name},
		})
		if err != nil {
			log.Fatal(err)
		}
		reg.MustRegister(c)
	}
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	go func() { log.Println(http.ListenAndServe(":9100", nil)) }()
	// ... train
}

// fixed stands in for a loader: any Stats method will do.
type fixed pipeline.Stats

func (f fixed) Stats() pipeline.Stats { return pipeline.Stats(f) }

// Each scrape reads one snapshot; here the registry is gathered directly.
func ExampleCollector_Collect() {
	ld := fixed{Batches: 125, Wait: 2500 * time.Millisecond}

	c, err := promconveyor.NewCollector(ld, nil)
	if err != nil {
		log.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "conveyor_loader_batches_total", "conveyor_loader_wait_seconds_total":
			fmt.Println(mf.GetName(), mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
	// Output:
	// conveyor_loader_batches_total 125
	// conveyor_loader_wait_seconds_total 2.5
}

// A dataset opened with source.Open is a ShardSource: register a ShardCollector
// for it next to the loader's Collector. A local dataset's counters stay zero.
func ExampleNewShardCollector_dataset() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if _, err := synth.WriteTree(dir, &synth.TreeOptions{Classes: 2, PerClass: 3, Seed: 1}); err != nil {
		log.Fatal(err)
	}
	// In training: "s3://bucket/train-{000000..001023}.tar".
	ds, err := source.Open(context.Background(), dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer ds.Close()
	c, err := promconveyor.NewShardCollector(ds, &promconveyor.Options{ConstLabels: prometheus.Labels{"dataset": "train"}})
	if err != nil {
		log.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "conveyor_objstore_requests_total" {
			fmt.Println(mf.GetName(), mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
	// Output:
	// conveyor_objstore_requests_total 0
}

// A training program serves its loader's metrics, with the Go runtime's and the
// process's, in one line; here the served page is read back.
func ExampleServe() {
	ld := fixed{Batches: 125} // in training: ld, err := pipeline.New(src, cfg)

	srv, err := promconveyor.Serve("127.0.0.1:0", ld, nil) // in training: ":9100"
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	resp, err := http.Get("http://" + srv.Addr() + "/metrics")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "conveyor_loader_batches_total ") {
			fmt.Println(l)
		}
	}
	// Output:
	// conveyor_loader_batches_total 125
}
