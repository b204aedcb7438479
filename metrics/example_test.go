package metrics_test

import (
	"encoding/json"
	"expvar"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/conveyor-ml/conveyor/metrics"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// A training job publishes its loader once; expvar then serves a fresh snapshot, beside
// memstats and cmdline, at /debug/vars on http.DefaultServeMux.
func ExamplePublish() {
	var ld *pipeline.Loader // from pipeline.New(src, cfg)

	if err := metrics.Publish("conveyor_train", ld); err != nil {
		log.Fatal(err) // the name was taken: one name per loader
	}
	// Importing expvar registers its handler; a job that serves other routes on its own
	// mux adds it there with mux.Handle("/debug/vars", expvar.Handler()).
	go func() { log.Println(http.ListenAndServe("localhost:6060", nil)) }()
	// ... train; then: curl -s localhost:6060/debug/vars | jq .conveyor_train
}

// Snap gives the same object for a job's own logs, or for a command's --json output.
func ExampleSnap() {
	st := pipeline.Stats{Epochs: 1, Batches: 125, Wait: 2500 * time.Millisecond}
	st.Stages.Read = pipeline.StageStats{Items: 1000, Busy: 4 * time.Second, Bytes: 110 << 20}
	s := metrics.Snap(st)
	fmt.Printf("waited %.1fs for %d batches; read %d files\n", s.WaitSeconds, s.Batches, s.Stages.Read.Items)

	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(s.Stages.Read); err != nil {
		log.Fatal(err)
	}
	// Output:
	// waited 2.5s for 125 batches; read 1000 files
	// {"items":1000,"busy_seconds":4,"bytes":115343360}
}

// Expvar gives the variable without publishing it, to place it in an expvar.Map with
// other job metrics.
func ExampleExpvar() {
	var ld *pipeline.Loader // from pipeline.New(src, cfg)

	job := expvar.NewMap("job")
	job.Set("loader", metrics.Expvar(ld))
	job.Add("steps", 0) // the training loop's own counters
}
