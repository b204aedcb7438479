package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/source"

	"github.com/conveyor-ml/conveyor/gpu/gputest"
	"github.com/conveyor-ml/conveyor/internal/s3test"
	"github.com/conveyor-ml/conveyor/internal/synth"
)

func TestBenchJSON(t *testing.T) {
	dir := t.TempDir()
	if _, err := synth.WriteTree(dir, &synth.TreeOptions{Classes: 2, PerClass: 9, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	for _, recipe := range []string{"train", "eval"} {
		var out bytes.Buffer
		if err := bench([]string{dir, "--recipe", recipe, "--size", "32", "--batch", "4", "--workers", "2", "--epochs", "2", "--json"}, &out); err != nil {
			t.Fatal(err)
		}
		var res map[string]any
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("%s: not one JSON object: %v\n%s", recipe, err, out.String())
		}
		for _, k := range []string{"images", "seconds", "images_per_s", "bad_samples"} {
			if _, ok := res[k]; !ok {
				t.Errorf("%s: no %q in %s", recipe, k, out.String())
			}
		}
		if res["images"].(float64) != 36 || res["bad_samples"].(float64) != 0 {
			t.Errorf("%s: %v images, %v bad; want 36 and 0", recipe, res["images"], res["bad_samples"])
		}
		for _, k := range []string{"mb_per_s", "first_batch_s", "cpu", "memory", "stage_busy", "queues", "decode_backend", "config", "settings"} {
			if _, ok := res[k]; !ok {
				t.Errorf("%s: no %q in %s", recipe, k, out.String())
			}
		}
	}
}

// TestBenchFidelity checks that the recipe picks the fidelity and --fidelity overrides it.
func TestBenchFidelity(t *testing.T) {
	dir := smallTree(t, 6)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--recipe", "eval"}, "exact"},
		{[]string{"--recipe", "train"}, "fast"},
		{[]string{"--recipe", "eval", "--fidelity", "fast"}, "fast"},
		{[]string{"--recipe", "train", "--fidelity", "exact"}, "exact"},
	} {
		res := benchJSON(t, dir, append([]string{"--workers", "1"}, c.args...)...)
		if res.Fidelity != c.want {
			t.Errorf("%q: fidelity %q, want %q", c.args, res.Fidelity, c.want)
		}
		if exact := strings.Contains(res.Config, "exact=true") && strings.Contains(res.Config, "fidelity=exact"); exact != (c.want == "exact") {
			t.Errorf("%q: config %q", c.args, res.Config)
		}
	}
}

// TestBenchMix runs the bench with batch mixing and smoothing: the configuration it
// reports says so, and the mix stage did one item per batch.
func TestBenchMix(t *testing.T) {
	res := benchJSON(t, smallTree(t, 6), "--workers", "2", "--mixup", "0.8", "--cutmix", "1", "--mix-switch", "0.3", "--smoothing", "0.1")
	if want := "mix={mixup=0.8 cutmix=1 switch=0.3 prob=1 smoothing=0.1}"; !strings.Contains(res.Config, want) {
		t.Errorf("config %q does not say %q", res.Config, want)
	}
	var mixed int64
	for _, s := range res.StageBusy {
		if s.Stage == "mix" {
			mixed = s.Items
		}
	}
	if mixed != 3 {
		t.Errorf("mix stage did %d batches, want 3 (12 images in batches of 4): %+v", mixed, res.StageBusy)
	}
}

// benchJSON runs bench with --json on a small tree and decodes its report.
func benchJSON(t *testing.T, dir string, args ...string) *benchResult {
	t.Helper()
	var out bytes.Buffer
	args = append([]string{dir, "--size", "32", "--batch", "4", "--json"}, args...)
	if err := benchTo(args, &out, io.Discard); err != nil {
		t.Fatalf("bench %q: %v", args, err)
	}
	var res benchResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("bench %q: not one JSON object: %v\n%s", args, err, out.String())
	}
	return &res
}

func smallTree(t *testing.T, perClass int) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := synth.WriteTree(dir, &synth.TreeOptions{Classes: 2, PerClass: perClass, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestBenchReport(t *testing.T) {
	dir := smallTree(t, 10)
	r := benchJSON(t, dir, "--workers", "2", "--epochs", "2")
	if r.Samples != 20 || r.Classes != 2 || len(r.Epochs) != 2 {
		t.Fatalf("report: %+v", r)
	}
	if r.FirstBatchS <= 0 || r.FirstBatchS > r.Seconds || r.ReadBytes <= 0 || r.MBPerS <= 0 {
		t.Errorf("first batch %v s of %v s, %d bytes read at %v MB/s", r.FirstBatchS, r.Seconds, r.ReadBytes, r.MBPerS)
	}
	if r.CPU.Cores < 1 || r.CPU.UserS+r.CPU.SysS <= 0 || r.CPU.Percent <= 0 {
		t.Errorf("cpu: %+v", r.CPU)
	}
	m := r.Memory
	if m.PeakRSS <= 0 || m.Budget <= 0 || m.PeakHeld <= 0 || m.PeakHeld > m.Budget || m.Pinned <= 0 || m.Device != "cpu (host memory)" || m.DeviceBytes != 0 {
		t.Errorf("memory: %+v", m)
	}
	if m.PeakHeap <= 0 || m.PeakGo < m.PeakHeap {
		t.Errorf("Go memory: heap %d, runtime %d", m.PeakHeap, m.PeakGo)
	}
	if _, _, _, ok := residentSplit(); ok {
		// The pinned buffers are anonymous memory, locked or at least written.
		if m.PeakAnon < m.Pinned || m.PeakAnon > m.PeakRSS || m.PeakFile <= 0 || m.AnonOverBudget != float64(m.PeakAnon)/float64(m.Budget) {
			t.Errorf("resident split: %+v", m)
		}
		for _, e := range r.Epochs {
			if e.PeakAnon <= 0 || e.PeakAnon > m.PeakAnon {
				t.Errorf("epoch %d: peak anonymous %d, the run's %d", e.Epoch, e.PeakAnon, m.PeakAnon)
			}
		}
	}
	share := 0.0
	for _, s := range r.StageBusy {
		share += s.Share
		if s.Items != 40 || s.BusyS <= 0 || s.MsPerItem <= 0 {
			t.Errorf("stage %+v: want 40 items and busy time", s)
		}
	}
	if len(r.StageBusy) != 4 || share < 0.999 || share > 1.001 {
		t.Errorf("stage shares sum to %v: %+v", share, r.StageBusy)
	}
	if len(r.Queues) != 3 || r.Queues[2].Queue != "ready" || r.Queues[2].Cap < 3 { // the most buffers the tuner may map
		t.Errorf("queues: %+v", r.Queues)
	}
	if s := r.Settings; s.Workers != 2 || s.Batch != 4 || s.Prefetch != 2 || s.StopAfter != "all" {
		t.Errorf("settings: %+v", s)
	}
	if r.Consumer != nil {
		t.Error("consumer reported without --step")
	}
	if l := r.Loader; l.Epochs != 2 || l.Batches != 10 || l.Stages.Pack.Items != 40 {
		t.Errorf("loader counters: %+v", l)
	}
}

func TestBenchStep(t *testing.T) {
	dir := smallTree(t, 10)
	r := benchJSON(t, dir, "--step", "20ms", "--workers", "1")
	c := r.Consumer
	if c == nil {
		t.Fatal("no consumer report with --step")
	}
	// 5 batches held 20 ms each.
	if c.StepS != 0.02 || c.WallS < 0.1 || c.WaitS < 0 || c.WaitS > c.WallS || c.Waited != c.WaitS/c.WallS {
		t.Errorf("consumer: %+v", c)
	}
}

func TestBenchCPUProfile(t *testing.T) {
	dir := smallTree(t, 10)
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	benchJSON(t, dir, "--cpuprofile", prof)
	b, err := os.ReadFile(prof)
	// A pprof profile is gzip-compressed protobuf.
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile: %d bytes, %v", len(b), err)
	}
	if err := benchTo([]string{dir, "--cpuprofile", filepath.Join(dir, "no", "such", "dir", "p")}, io.Discard, io.Discard); err == nil {
		t.Error("an unwritable profile path was accepted")
	}
}

func TestBenchStages(t *testing.T) {
	dir := smallTree(t, 10)
	r := benchJSON(t, dir, "--stages", "--epochs", "2")
	var got []string
	for _, c := range r.Ceilings {
		got = append(got, c.Stage)
		if c.ImagesPerS <= 0 || c.MsPerImage <= 0 || c.AddsMs < 0 {
			t.Errorf("ceiling %+v", c)
		}
	}
	if strings.Join(got, ",") != "read,decode,augment,all" {
		t.Errorf("ceilings %v", got)
	}
	if !strings.Contains("read decode augment pack", r.Bottleneck) || r.Bottleneck == "" || r.H2D == "" {
		t.Errorf("bottleneck %q, h2d %q", r.Bottleneck, r.H2D)
	}
	// The report is the full pipeline's.
	if r.Settings.StopAfter != "all" || r.StageBusy[3].Items != 40 {
		t.Errorf("report of %q with %d packed", r.Settings.StopAfter, r.StageBusy[3].Items)
	}

	// With a step, the ceilings are still the loader's and one more run reports the waits.
	var out bytes.Buffer
	if err := benchTo([]string{dir, "--size", "32", "--batch", "4", "--stages", "--step", "10ms"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"read+decode+augment", "full pipeline", "bottleneck: ", "host-to-device copy: ", "waited for input", "consumer: a 10ms step takes at most 400 images/s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBottleneck(t *testing.T) {
	cs := []ceiling{{Stage: "read", ImagesPerS: 10000}, {Stage: "decode", ImagesPerS: 1000}, {Stage: "augment", ImagesPerS: 900}, {Stage: "all", ImagesPerS: 950}}
	name, adds := bottleneck(cs)
	if name != "decode" || adds < 0.89 || adds > 0.91 {
		t.Errorf("bottleneck %q adds %v ms, want decode 0.9", name, adds)
	}
	if cs[3].AddsMs != 0 {
		t.Errorf("a faster full run adds %v ms, want 0", cs[3].AddsMs)
	}
	cs = []ceiling{{Stage: "read", ImagesPerS: 100}, {Stage: "decode", ImagesPerS: 95}, {Stage: "augment", ImagesPerS: 94}, {Stage: "all", ImagesPerS: 90}}
	if name, _ := bottleneck(cs); name != "read" {
		t.Errorf("slow disk: bottleneck %q, want read", name)
	}
}

func TestBenchSweep(t *testing.T) {
	dir := smallTree(t, 6)
	plotPath := filepath.Join(t.TempDir(), "sweep.png")
	r := benchJSON(t, dir, "--workers", "1,2", "--batch", "3,4", "--plot", plotPath)
	if strings.Join(r.Sweep, ",") != "workers,batch" || len(r.Runs) != 4 || r.Plot != plotPath {
		t.Fatalf("sweep %v with %d runs, plot %q", r.Sweep, len(r.Runs), r.Plot)
	}
	var got []string
	for _, run := range r.Runs {
		got = append(got, fmt.Sprintf("%d/%d", run.Settings.Workers, run.Settings.Batch))
		if run.Images != 12 {
			t.Errorf("run %+v: %d images", run.Settings, run.Images)
		}
	}
	if strings.Join(got, " ") != "1/3 1/4 2/3 2/4" {
		t.Errorf("runs %v", got)
	}
	f, err := os.Open(plotPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil || cfg.Width < 300 || cfg.Height < 200 {
		t.Errorf("plot: %v, %dx%d", err, cfg.Width, cfg.Height)
	}

	// Text: a table row per run; the default plot path is in the working directory.
	t.Chdir(t.TempDir())
	var out bytes.Buffer
	if err := benchTo([]string{dir, "--size", "32", "--prefetch", "1,2"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("conveyor-bench-prefetch.png"); err != nil || !strings.Contains(out.String(), "plot: conveyor-bench-prefetch.png") {
		t.Errorf("default plot: %v\n%s", err, out.String())
	}
}

func TestBenchProgress(t *testing.T) {
	dir := smallTree(t, 40)
	defer func(f func(io.Writer) bool) { isTerminal = f }(isTerminal)
	for _, tty := range []bool{false, true} {
		isTerminal = func(io.Writer) bool { return tty }
		var stderr bytes.Buffer
		// One step longer than the redraw interval, so a redraw is due.
		if err := benchTo([]string{dir, "--size", "32", "--batch", "40", "--step", "300ms"}, io.Discard, &stderr); err != nil {
			t.Fatal(err)
		}
		drawn := strings.Contains(stderr.String(), "img/s") && strings.Contains(stderr.String(), "\r")
		if drawn != tty {
			t.Errorf("terminal %t: progress drawn %t: %q", tty, drawn, stderr.String())
		}
	}
}

func TestBenchText(t *testing.T) {
	dir := t.TempDir()
	if _, err := synth.WriteTree(dir, &synth.TreeOptions{Classes: 2, PerClass: 5, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := bench([]string{"--size", "16", "--batch", "4", dir}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "images_per_s=") || !strings.Contains(out.String(), "images=10 ") {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestBenchErrors(t *testing.T) {
	for _, args := range [][]string{
		{"/nonexistent/conveyor"},
		{t.TempDir()},
		{"--recipe", "nope"},
		{"--images", "3"},
		{"--dtype", "int7"},
		{"a", "b"},
		{"--workers", "1,x"},
		{"--workers", "0"},
		{"--epochs", "0"},
		{"--step", "-1s"},
		{"--stages", "--workers", "1,2"},
		{"--plot", "x.png"},
		{"--mixup", "-1"},
		{"--cutmix", "NaN"},
		{"--mixup", "1", "--mix-switch", "0"},
		{"--mix-prob", "1.5"},
		{"--smoothing", "1"},
		{"--fidelity", "exactly"},
	} {
		if err := benchTo(args, &bytes.Buffer{}, io.Discard); err == nil {
			t.Errorf("bench %q: no error", args)
		}
	}
}

// --micro-batches delivers the same images in micro-batches and reports pinned and
// device buffers of one micro-batch each.
func TestBenchMicroBatches(t *testing.T) {
	dir := smallTree(t, 10)
	whole := benchJSON(t, dir, "--batch", "8")
	micro := benchJSON(t, dir, "--batch", "8", "--micro-batches", "4")
	if micro.Images != whole.Images || micro.Settings.MicroBatches != 4 || whole.Settings.MicroBatches != 1 {
		t.Fatalf("micro-batches: %d images, settings %+v; whole batches: %d images, %+v", micro.Images, micro.Settings, whole.Images, whole.Settings)
	}
	// 20 images: batches of 8, 8 and 4, delivered as 4+4+2 micro-batches.
	if micro.Loader.Batches != 10 || whole.Loader.Batches != 3 {
		t.Errorf("delivered %d micro-batches, %d whole batches", micro.Loader.Batches, whole.Loader.Batches)
	}
	mm, wm := micro.Memory, whole.Memory
	if mm.PinnedBufferBytes*4 != wm.PinnedBufferBytes || mm.PinnedBufferBytes != 2*32*32*3*4 || mm.PinnedBuffers != 3 || mm.Pinned <= 0 || mm.Pinned > wm.Pinned {
		t.Errorf("pinned: micro-batches %+v, whole batches %+v", mm, wm)
	}
	if mm.DeviceBytes != 0 || mm.DeviceBuffers != 0 || mm.DeviceBufferBytes != 0 {
		t.Errorf("cpu device: %+v", mm)
	}

	var out bytes.Buffer
	if err := benchTo([]string{dir, "--size", "32", "--batch", "8", "--micro-batches", "4"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "3 buffers of 24 KiB, one micro-batch (2 samples) each") {
		t.Errorf("text report does not describe the micro-batch buffers:\n%s", out.String())
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--micro-batches", "0"}, "--micro-batches 0 < 1"},
		{[]string{"--batch", "8", "--micro-batches", "3"}, "MicroBatches 3 does not divide BatchSize 8"},
	} {
		err := benchTo(append([]string{dir, "--size", "32"}, c.args...), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.args, err, c.want)
		}
	}

	f := gputest.Use(t) // the rest skips without the stand-in CUDA driver
	whole = benchJSON(t, dir, "--batch", "8", "--device", "cuda:0", "--device-cast")
	micro = benchJSON(t, dir, "--batch", "8", "--device", "cuda:0", "--device-cast", "--micro-batches", "4")
	if f.Allocated() != 0 {
		t.Errorf("%d device bytes left after the runs", f.Allocated())
	}
	mm, wm = micro.Memory, whole.Memory
	// Two buffers of 2 float32 samples, and the uint8 staging buffer.
	if mm.DeviceBytes != 2*2*32*32*3*4+2*32*32*3 || mm.DeviceBytes*4 != wm.DeviceBytes || mm.DeviceBuffers != 2 || mm.DeviceBufferBytes*4 != wm.DeviceBufferBytes {
		t.Errorf("device: micro-batches %+v, whole batches %+v", mm, wm)
	}
	out.Reset()
	if err := benchTo([]string{dir, "--size", "32", "--batch", "8", "--micro-batches", "4", "--device", "cuda:0"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "2 buffers of 24 KiB, one micro-batch (2 samples) each") {
		t.Errorf("text report does not describe the device buffers:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "registered with the GPU driver") || !whole.Memory.PinnedRegistered {
		t.Errorf("the report does not say the pinned buffers are registered:\n%s", out.String())
	}
}

func TestBenchOrderAndRankFromEnv(t *testing.T) {
	dir := smallTree(t, 6)
	for _, k := range []string{"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("RANK", "1")
	t.Setenv("WORLD_SIZE", "2")
	res := benchJSON(t, dir, "--order", "shards", "--partitions", "4", "--rank-from-env")
	for _, want := range []string{"rank=1/2", "order=shards partitions=4 shuffle_block=4", "ranks_from_env=true"} {
		if !strings.Contains(res.Config, want) {
			t.Errorf("config lacks %q: %s", want, res.Config)
		}
	}
	if res.Images != 6 { // 12 images, half of them this rank's
		t.Errorf("rank 1 of 2 measured %d images, want 6", res.Images)
	}
	err := benchTo([]string{dir, "--order", "blocks"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `--order: pipeline: unknown order "blocks"`) {
		t.Errorf("--order blocks: %v", err)
	}
	t.Setenv("WORLD_SIZE", "x")
	err = benchTo([]string{dir, "--rank-from-env"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `WORLD_SIZE="x"`) {
		t.Errorf("--rank-from-env with WORLD_SIZE=x: %v", err)
	}
}

// wdsShards writes a synthetic tree of 2 classes × 9 images as WebDataset shards
// DIR/train-NN.tar, shard k holding samples ranges[k], and returns DIR and their paths.
func wdsShards(t *testing.T, ranges [][2]int) (dir string, shards []string) {
	t.Helper()
	tree := t.TempDir()
	if _, err := synth.WriteTree(tree, &synth.TreeOptions{Classes: 2, PerClass: 9, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	src, err := source.Dir(tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	for k, r := range ranges {
		var buf bytes.Buffer
		if err := source.WriteWebDataset(&buf, src, r[0], r[1]); err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(dir, fmt.Sprintf("train-%02d.tar", k))
		if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		shards = append(shards, name)
	}
	return dir, shards
}

// bench reads WebDataset shards given as files or as a pattern.
func TestBenchWebDataset(t *testing.T) {
	dir, shards := wdsShards(t, [][2]int{{0, 10}, {10, 18}})
	for _, args := range [][]string{shards, {filepath.Join(dir, "train-*.tar")}} {
		var out bytes.Buffer
		if err := bench(append(args, "--size", "32", "--batch", "4", "--workers", "2", "--json"), &out); err != nil {
			t.Fatal(err)
		}
		var res map[string]any
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("not one JSON object: %v\n%s", err, out.String())
		}
		if res["images"].(float64) != 18 || res["bad_samples"].(float64) != 0 || res["classes"].(float64) != 2 ||
			!strings.HasPrefix(res["dataset"].(string), "webdataset:") {
			t.Errorf("%q: %v images, %v bad, %v classes, dataset %v", args, res["images"], res["bad_samples"], res["classes"], res["dataset"])
		}
	}
	for _, args := range [][]string{{filepath.Join(dir, "none-*.tar")}, {filepath.Join(dir, "missing.tar")}} {
		if err := bench(args, io.Discard); err == nil || !strings.Contains(err.Error(), filepath.Base(args[0])) {
			t.Errorf("%q: error %v, want one naming it", args, err)
		}
	}
}

// bench reads WebDataset shards from a real S3 server by URL and reports the object
// store's counters; a local brace list works too.
func TestBenchS3(t *testing.T) { s3test.Each(t, testBenchS3) }

func testBenchS3(t *testing.T, srv *s3test.Server) {
	dir, shards := wdsShards(t, [][2]int{{0, 6}, {6, 12}, {12, 18}})
	for _, name := range shards {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		srv.Put(t, "wds/"+filepath.Base(name), data)
	}
	srv.Env(t, "")
	args := []string{"--size", "32", "--batch", "4", "--workers", "2", "--order", "shards"}
	var out bytes.Buffer
	if err := bench(append([]string{srv.URL("wds/train-{00..02}.tar"), "--json", "--shard-cache", t.TempDir(), "--shard-cache-max-bytes", "1M"}, args...), &out); err != nil {
		t.Fatal(err)
	}
	var res struct {
		Images   int    `json:"images"`
		Bad      int    `json:"bad_samples"`
		Dataset  string `json:"dataset"`
		ObjStore *struct {
			Requests     int64 `json:"requests"`
			BytesFetched int64 `json:"bytes_fetched"`
			Fetched      int64 `json:"shards_fetched"`
			Evictions    int64 `json:"shard_cache_evictions"`
			Misses       int64 `json:"shard_cache_misses"`
			Hits         int64 `json:"shard_cache_hits"`
		} `json:"objstore"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out.String())
	}
	// Indexing fetches the 3 shards, the epoch again after the cache was emptied.
	if o := res.ObjStore; res.Images != 18 || res.Bad != 0 || !strings.Contains(res.Dataset, "s3://") || o == nil ||
		o.Fetched != 6 || o.Requests < 6 || o.BytesFetched == 0 || o.Evictions < 3 || o.Hits+o.Misses < 18 {
		t.Errorf("%s", out.String())
	}

	out.Reset()
	if err := bench(append([]string{srv.URL("wds/")}, args...), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "conveyor objstore requests=") || !strings.Contains(out.String(), "object store") {
		t.Errorf("text report without the object store's counters:\n%s", out.String())
	}

	out.Reset()
	if err := bench(append([]string{filepath.Join(dir, "train-{00..02}.tar"), "--json"}, args...), &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), `"objstore"`) || !strings.Contains(out.String(), `"images":18`) {
		t.Errorf("local brace list: %s", out.String())
	}

	// inspect describes the same shards, remote and local, with their sample counts.
	for _, url := range []string{srv.URL("wds/train-{00..02}.tar"), filepath.Join(dir, "train-*.tar")} {
		out.Reset()
		if err := inspect([]string{url, "--json"}, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		var ins struct {
			Shards, Samples, Classes, Bad int
			ShardSamples                  []int          `json:"shard_samples"`
			ObjStore                      map[string]any `json:"objstore"`
		}
		if err := json.Unmarshal(out.Bytes(), &ins); err != nil {
			t.Fatalf("inspect %s: %v\n%s", url, err, out.String())
		}
		if ins.Shards != 3 || ins.Samples != 18 || ins.Classes != 2 || ins.Bad != 0 || fmt.Sprint(ins.ShardSamples) != "[6 6 6]" ||
			(ins.ObjStore != nil) != strings.HasPrefix(url, "s3://") {
			t.Errorf("inspect %s: %s", url, out.String())
		}
		out.Reset()
		if err := inspect([]string{url}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "18 (0 bad), 2 classes") {
			t.Errorf("inspect %s: %v\n%s", url, err, out.String())
		}
	}

	// With inspect's counts, bench indexes lazily: each shard is fetched once, for the
	// epoch, not first to index it.
	out.Reset()
	if err := inspect([]string{srv.URL("wds/train-{00..02}.tar"), "--json"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(t.TempDir(), "index.json")
	if err := os.WriteFile(idx, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := bench(append([]string{srv.URL("wds/train-{00..02}.tar"), "--json", "--shard-index", idx}, args...), &out); err != nil {
		t.Fatal(err)
	}
	res.ObjStore = nil
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if o := res.ObjStore; res.Images != 18 || res.Bad != 0 || o == nil || o.Fetched != 3 {
		t.Errorf("--shard-index: %s", out.String())
	}
	if err := bench(append([]string{srv.URL("wds/train-{00..01}.tar"), "--shard-index", idx}, args...), io.Discard); err == nil || !strings.Contains(err.Error(), "ShardSamples") {
		t.Errorf("--shard-index for other shards: %v", err)
	}
	// A shard listed twice is refused, not read from the older format's keys.
	var twice map[string]any
	raw, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &twice); err != nil {
		t.Fatal(err)
	}
	list := twice["shardlist"].([]any)
	twice["shardlist"] = append(list, list[0])
	if raw, err = json.Marshal(twice); err != nil {
		t.Fatal(err)
	}
	twiceIdx := filepath.Join(t.TempDir(), "twice.json")
	if err := os.WriteFile(twiceIdx, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := bench(append([]string{srv.URL("wds/train-{00..02}.tar"), "--shard-index", twiceIdx}, args...), io.Discard); err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Errorf("--shard-index listing a shard twice: %v", err)
	}

	// The same index kept beside the shards is a dataset URL of its own: lazy, the index
	// fetched and each shard once; verify reads through it too.
	data, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	srv.Put(t, "wds/train.json", data)
	out.Reset()
	if err := bench(append([]string{srv.URL("wds/train.json"), "--json"}, args...), &out); err != nil {
		t.Fatal(err)
	}
	res.ObjStore = nil
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if o := res.ObjStore; res.Images != 18 || res.Bad != 0 || o == nil || o.Fetched != 4 {
		t.Errorf("bench of the shard index: %s", out.String())
	}
	out.Reset()
	if err := verify([]string{srv.URL("wds/train.json")}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "shards=3 samples=18 classes=2 bad=0") {
		t.Errorf("verify of the shard index: %v\n%s", err, out.String())
	}

	for _, c := range []struct{ url, want string }{
		{srv.URL("wds/train-{00..03}.tar"), srv.URL("wds/train-03.tar")},
		{srv.URL("nothing/"), srv.URL("nothing/")},
		{"s3://x/y.tar", "s3://x/y.tar"},
	} {
		if err := bench([]string{c.url}, io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %s", c.url, err, c.want)
		}
	}
}
