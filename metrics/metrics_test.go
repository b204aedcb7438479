package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"expvar"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/source"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/gpu"
	"github.com/conveyor-ml/conveyor/internal/leakcheck"
	"github.com/conveyor-ml/conveyor/internal/synth"
	"github.com/conveyor-ml/conveyor/metrics"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pinned"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// Every goroutine a loader starts must have exited once the tests end.
func TestMain(m *testing.M) { leakcheck.Main(m) }

// fake is a Source that returns whatever the test put in it.
type fake struct{ st pipeline.Stats }

func (f *fake) Stats() pipeline.Stats { return f.st }

// fakeStats has a distinct value in every field, so a field copied into the wrong key
// shows up.
func fakeStats() pipeline.Stats {
	st := pipeline.Stats{Epochs: 2, Batches: 30, Wait: 1500 * time.Millisecond}
	st.Stages.Read = pipeline.StageStats{Items: 240, Busy: 2 * time.Second, Bytes: 1 << 20}
	st.Stages.Decode = pipeline.StageStats{Items: 239, Busy: 4250 * time.Millisecond, Bytes: 3 << 20}
	st.Stages.Augment = pipeline.StageStats{Items: 238, Busy: 500 * time.Millisecond, Bytes: 238}
	st.Stages.Pack = pipeline.StageStats{Items: 237, Busy: 250 * time.Millisecond, Bytes: 5 << 20}
	q := &st.Queues
	q.Tasks.Len, q.Tasks.Cap, q.Decoded.Len, q.Decoded.Cap, q.Ready.Len, q.Ready.Cap = 3, 64, 5, 16, 1, 4
	st.Tuning.Workers, st.Tuning.IOWorkers, st.Tuning.Steps = 3, 32, 4
	st.Bad.Samples = 12
	st.Cache.Hits, st.Cache.Stored, st.Cache.Deferred = 100, 40, 7
	st.Cache.Store = &cache.Stats{
		Records: 140, Shards: 3, Bytes: 9 << 20, Hits: 101, Misses: 41, Corrupt: 1,
		Written: 42, Rejected: 2, Evicted: 4, Full: true, Disabled: "disk full",
	}
	m := &st.Memory
	m.Budget, m.PeakHeld, m.ReadBudget, m.PeakRead = 1<<30, 300<<20, 64<<20, 10<<20
	m.DecodeBudget, m.PeakDecode, m.Returns = 128<<20, 20<<20, 3
	m.Pinned = pinned.Stats{
		BufferSize: 1 << 20, Buffers: 6, InUse: 2, PeakInUse: 5, BytesMapped: 6 << 20,
		BytesInUse: 2 << 20, PeakBytesInUse: 5 << 20, Budget: 8 << 20, Locked: false,
		LockError: "mlock: operation not permitted", Gets: 60, Waits: 9, Registered: true,
	}
	m.Outstanding = 2
	d := &st.Device
	d.Kind, d.Name, d.Bytes, d.Copies = gpu.CUDA, "cuda:0 (NVIDIA H100 80GB HBM3, 79.1 GiB, driver 12.8)", 77<<20, 30
	d.CopyWaits, d.CopyWaitTime, d.SlotWait = 1, 3*time.Millisecond, 1500*time.Millisecond
	// Twelve failures, more than a Snapshot lists.
	for i := range 12 {
		st.Bad.Recent = append(st.Bad.Recent, pipeline.SampleError{
			Path: fmt.Sprintf("class00/%05d.jpg", i), Index: i, Epoch: 1, Err: errors.New("decode: truncated"),
		})
	}
	return st
}

const fakeJSON = `{
	"epochs": 2, "batches": 30, "wait_seconds": 1.5,
	"stages": {
		"read":    {"items": 240, "busy_seconds": 2,    "bytes": 1048576},
		"decode":  {"items": 239, "busy_seconds": 4.25, "bytes": 3145728},
		"augment": {"items": 238, "busy_seconds": 0.5,  "bytes": 238},
		"pack":    {"items": 237, "busy_seconds": 0.25, "bytes": 5242880}
	},
	"queues": {"tasks": {"len": 3, "cap": 64}, "decoded": {"len": 5, "cap": 16}, "ready": {"len": 1, "cap": 4}},
	"workers": 3, "io_workers": 32, "tune_steps": 4,
	"bad_samples": 12,
	"recent_bad": [
		{"path": "class00/00004.jpg", "index": 4,  "epoch": 1, "error": "decode: truncated"},
		{"path": "class00/00005.jpg", "index": 5,  "epoch": 1, "error": "decode: truncated"},
		{"path": "class00/00006.jpg", "index": 6,  "epoch": 1, "error": "decode: truncated"},
		{"path": "class00/00007.jpg", "index": 7,  "epoch": 1, "error": "decode: truncated"},
		{"path": "class00/00008.jpg", "index": 8,  "epoch": 1, "error": "decode: truncated"},
		{"path": "class00/00009.jpg", "index": 9,  "epoch": 1, "error": "decode: truncated"},
		{"path": "class00/00010.jpg", "index": 10, "epoch": 1, "error": "decode: truncated"},
		{"path": "class00/00011.jpg", "index": 11, "epoch": 1, "error": "decode: truncated"}
	],
	"cache_hits": 100, "cache_stored": 40, "cache_deferred": 7,
	"cache": {
		"records": 140, "shards": 3, "bytes": 9437184, "hits": 101, "misses": 41, "corrupt": 1,
		"written": 42, "rejected": 2, "evicted": 4, "full": true, "disabled": "disk full"
	},
	"memory": {
		"budget": 1073741824, "peak_held": 314572800, "read_budget": 67108864, "peak_read": 10485760,
		"decode_budget": 134217728, "peak_decode": 20971520, "returns": 3
	},
	"pinned": {
		"buffer_size": 1048576, "buffers": 6, "in_use": 2, "peak_in_use": 5, "bytes_mapped": 6291456,
		"bytes_in_use": 2097152, "peak_bytes_in_use": 5242880, "budget": 8388608, "locked": false,
		"lock_error": "mlock: operation not permitted", "gets": 60, "waits": 9, "registered": true
	},
	"outstanding": 2,
	"device": {"kind": "cuda", "name": "cuda:0 (NVIDIA H100 80GB HBM3, 79.1 GiB, driver 12.8)", "bytes": 80740352, "copies": 30,
		"copy_waits": 1, "copy_wait_seconds": 0.003, "slot_wait_seconds": 1.5}
}`

// equalJSON reports whether two JSON texts hold the same value, ignoring layout.
func equalJSON(t *testing.T, got, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("got invalid JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want invalid JSON: %v\n%s", err, want)
	}
	return reflect.DeepEqual(g, w)
}

func TestExpvarJSON(t *testing.T) {
	tests := []struct {
		name string
		edit func(*pipeline.Stats)
	}{
		{name: "full", edit: func(*pipeline.Stats) {}},
		{
			name: "no cache, no failures",
			edit: func(st *pipeline.Stats) { st.Cache.Store, st.Bad.Samples, st.Bad.Recent = nil, 0, nil },
		},
		{
			name: "nil cause",
			edit: func(st *pipeline.Stats) {
				st.Bad.Samples, st.Bad.Recent = 1, []pipeline.SampleError{{Path: "a.jpg", Index: 3}}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := fakeStats()
			tt.edit(&st)
			// The expected value: fakeJSON, edited through a generic map the same way.
			var want map[string]any
			if err := json.Unmarshal([]byte(fakeJSON), &want); err != nil {
				t.Fatal(err)
			}
			if st.Cache.Store == nil {
				want["cache"] = nil
			}
			want["bad_samples"] = float64(st.Bad.Samples)
			recent := []any{}
			for _, e := range st.Bad.Recent[max(0, len(st.Bad.Recent)-8):] {
				cause := ""
				if e.Err != nil {
					cause = e.Err.Error()
				}
				recent = append(recent, map[string]any{"path": e.Path, "index": float64(e.Index), "epoch": float64(e.Epoch), "error": cause})
			}
			want["recent_bad"] = recent
			wantJSON, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}

			got := metrics.Expvar(&fake{st}).String()
			if !equalJSON(t, got, string(wantJSON)) {
				t.Errorf("got\n%s\nwant\n%s", got, wantJSON)
			}
		})
	}
}

// TestExpvarGolden pins the full shape against the literal text, so a renamed key or
// a wrong unit fails even if the edits above were wrong in the same way.
func TestExpvarGolden(t *testing.T) {
	got := metrics.Expvar(&fake{fakeStats()}).String()
	if !equalJSON(t, got, fakeJSON) {
		t.Errorf("got\n%s\nwant\n%s", got, fakeJSON)
	}
	// recent_bad is [] rather than null without failures, and cache is present as null.
	got = metrics.Expvar(&fake{}).String()
	for _, want := range []string{`"recent_bad":[]`, `"cache":null`} {
		if !strings.Contains(got, want) {
			t.Errorf("%s missing from %s", want, got)
		}
	}
}

func TestExpvarReadsFreshSnapshot(t *testing.T) {
	src := &fake{fakeStats()}
	v := metrics.Expvar(src)
	var s metrics.Snapshot
	if err := json.Unmarshal([]byte(v.String()), &s); err != nil {
		t.Fatal(err)
	}
	if s.Batches != 30 {
		t.Fatalf("batches = %d, want 30", s.Batches)
	}
	src.st.Batches = 31
	if err := json.Unmarshal([]byte(v.String()), &s); err != nil {
		t.Fatal(err)
	}
	if s.Batches != 31 {
		t.Errorf("batches = %d after the source moved on, want 31", s.Batches)
	}
}

func TestSnapDoesNotAlias(t *testing.T) {
	st := fakeStats()
	s := metrics.Snap(st)
	st.Bad.Recent[len(st.Bad.Recent)-1].Path = "changed"
	if got := s.RecentBad[len(s.RecentBad)-1].Path; got != "class00/00011.jpg" {
		t.Errorf("Snapshot shares RecentBad with the Stats: newest path %q", got)
	}
}

func TestPublishTwice(t *testing.T) {
	const name = "conveyor_test_publish_twice"
	if err := metrics.Publish(name, &fake{}); err != nil {
		t.Fatal(err)
	}
	err := metrics.Publish(name, &fake{fakeStats()})
	if err == nil || !strings.Contains(err.Error(), name) {
		t.Fatalf("second Publish: err = %v, want one naming %q", err, name)
	}
	// The first publication is untouched.
	var s metrics.Snapshot
	if err := json.Unmarshal([]byte(expvar.Get(name).String()), &s); err != nil {
		t.Fatal(err)
	}
	if s.Batches != 0 {
		t.Errorf("batches = %d, want the first source's 0", s.Batches)
	}
	// A name published directly through expvar is taken too.
	expvar.NewInt("conveyor_test_plain_int")
	if err := metrics.Publish("conveyor_test_plain_int", &fake{}); err == nil {
		t.Error("Publish over an expvar.Int succeeded")
	}
}

// newLoader builds a loader over dir the way a training job would.
func newLoader(t *testing.T, dir string, cfg *pipeline.Config) *pipeline.Loader {
	t.Helper()
	src, err := source.Dir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pipeline.ApplyRecipe(cfg, "train", 24); err != nil {
		t.Fatal(err)
	}
	ld, err := pipeline.New(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ld.Close(); err != nil {
			t.Error(err)
		}
	})
	return ld
}

func runEpoch(t *testing.T, ld *pipeline.Loader) (samples, batches int) {
	t.Helper()
	for b, err := range ld.Epoch(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		samples += b.Len
		batches++
		b.Release()
	}
	return samples, batches
}

// published reads name back through expvar, as /debug/vars would.
func published(t *testing.T, name string) metrics.Snapshot {
	t.Helper()
	v := expvar.Get(name)
	if v == nil {
		t.Fatalf("%s not published", name)
	}
	var s metrics.Snapshot
	if err := json.Unmarshal([]byte(v.String()), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPublishLoader(t *testing.T) {
	dir := t.TempDir()
	const n = 21 // 3 classes x 7: batches of 8, 8 and 5
	if _, err := synth.WriteTree(dir, &synth.TreeOptions{Classes: 3, PerClass: 7, Seed: 5, MinSide: 40, MaxSide: 100, Formats: synth.AllFormats()}); err != nil {
		t.Fatal(err)
	}
	var fileBytes int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		fileBytes += info.Size()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &pipeline.Config{
		Batch: pipeline.BatchConfig{Size: 8}, Tuning: pipeline.TuningConfig{Workers: 2}, Order: pipeline.OrderConfig{Seed: 1},
		Pack: pack.Options{DType: pack.Float32, Normalize: true},
		Logf: func(string, ...any) {},
	}
	ld := newLoader(t, dir, cfg)
	const name = "conveyor_test_loader"
	if err := metrics.Publish(name, ld); err != nil {
		t.Fatal(err)
	}
	if s := published(t, name); s.Epochs != 0 || s.Batches != 0 || s.Stages.Read.Items != 0 {
		t.Errorf("before any epoch: %+v", s)
	}

	samples, batches := runEpoch(t, ld)
	if samples != n || batches != 3 {
		t.Fatalf("epoch gave %d samples in %d batches, want %d in 3", samples, batches, n)
	}
	s := published(t, name)
	if s.Epochs != 1 || s.Batches != int64(batches) {
		t.Errorf("epochs, batches = %d, %d; want 1, %d", s.Epochs, s.Batches, batches)
	}
	for _, st := range []struct {
		name string
		s    metrics.Stage
	}{{"read", s.Stages.Read}, {"decode", s.Stages.Decode}, {"augment", s.Stages.Augment}, {"pack", s.Stages.Pack}} {
		if st.s.Items != n || st.s.BusySeconds <= 0 {
			t.Errorf("%s: %d items in %gs, want %d items and some time", st.name, st.s.Items, st.s.BusySeconds, n)
		}
	}
	if s.Stages.Read.Bytes != fileBytes {
		t.Errorf("read %d bytes, the files hold %d", s.Stages.Read.Bytes, fileBytes)
	}
	if want := int64(n * 3 * 24 * 24 * 4); s.Stages.Pack.Bytes != want {
		t.Errorf("packed %d bytes, want %d (%d float32 samples of 3x24x24)", s.Stages.Pack.Bytes, want, n)
	}
	if s.BadSamples != 0 || len(s.RecentBad) != 0 {
		t.Errorf("bad samples %d %v in a clean tree", s.BadSamples, s.RecentBad)
	}
	if s.Cache != nil || s.CacheHits != 0 {
		t.Errorf("cache %+v, %d hits without a cache", s.Cache, s.CacheHits)
	}
	if s.Queues != (metrics.Queues{}) || s.Outstanding != 0 {
		t.Errorf("idle loader: queues %+v, %d outstanding; want all zero", s.Queues, s.Outstanding)
	}
	m := s.Memory
	if m.Budget <= 0 || m.PeakHeld <= 0 || m.PeakHeld > m.Budget || m.PeakRead > m.ReadBudget || m.PeakDecode > m.DecodeBudget {
		t.Errorf("memory %+v: want 0 < peak_held <= budget and each peak within its budget", m)
	}
	if p := s.Pinned; p.Buffers <= 0 || p.InUse != 0 || p.PeakInUse <= 0 || p.Gets < int64(batches) {
		t.Errorf("pinned %+v after %d batches, all released", p, batches)
	}
	// The same numbers the loader reports directly.
	if direct := metrics.Snap(ld.Stats()); direct.Stages != s.Stages || direct.Batches != s.Batches {
		t.Errorf("expvar %+v, Snap %+v", s.Stages, direct.Stages)
	}
}

func TestPublishLoaderBadSample(t *testing.T) {
	dir := t.TempDir()
	if _, err := synth.WriteTree(dir, &synth.TreeOptions{Classes: 2, PerClass: 6, Seed: 6, MinSide: 40, MaxSide: 100}); err != nil {
		t.Fatal(err)
	}
	const bad = "class01/zz-not-an-image.jpg"
	if err := os.WriteFile(filepath.Join(dir, bad), []byte("this is not an image\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := &pipeline.Config{
		Batch: pipeline.BatchConfig{Size: 4}, Tuning: pipeline.TuningConfig{Workers: 2}, Order: pipeline.OrderConfig{Seed: 1}, Bad: pipeline.BadConfig{MaxFraction: 0.5},
		Pack: pack.Options{DType: pack.Uint8},
		Logf: func(string, ...any) {},
	}
	ld := newLoader(t, dir, cfg)
	const name = "conveyor_test_loader_bad"
	if err := metrics.Publish(name, ld); err != nil {
		t.Fatal(err)
	}
	runEpoch(t, ld)
	s := published(t, name)
	if s.BadSamples < 1 || len(s.RecentBad) < 1 {
		t.Fatalf("bad_samples %d, recent_bad %v; want the broken file", s.BadSamples, s.RecentBad)
	}
	newest := s.RecentBad[len(s.RecentBad)-1]
	if filepath.ToSlash(newest.Path) != bad || newest.Error == "" || newest.Epoch != 0 {
		t.Errorf("recent_bad ends with %+v, want %s with a reason, epoch 0", newest, bad)
	}
}
