package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/internal/s3test"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The headline is the steady state: the epochs after the first, over their own time;
// the first epoch, loader creation and the whole run are reported apart.
func TestBenchHeadlineSteadyState(t *testing.T) {
	dir := smallTree(t, 10)
	r := benchJSON(t, dir, "--workers", "2", "--epochs", "3")
	e := r.Epochs
	want := float64(e[1].Images+e[2].Images) / (e[1].Seconds + e[2].Seconds)
	if len(e) != 3 || r.SteadyImagesPerS != want {
		t.Errorf("steady %v images/s, want epochs 1-2's %v", r.SteadyImagesPerS, want)
	}
	if r.CreateS <= 0 || r.CreateS >= r.Seconds || e[1].ReadBytes <= 0 || r.SteadyMBPerS <= 0 {
		t.Errorf("created in %v s of %v s; epoch 1 read %d bytes, steady %v MB/s", r.CreateS, r.Seconds, e[1].ReadBytes, r.SteadyMBPerS)
	}
	var out bytes.Buffer
	printReport(&out, r)
	rows := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if k, v, ok := strings.Cut(l, "  "); ok {
			rows[k] = strings.TrimSpace(v)
		}
	}
	if got := rows["throughput"]; !strings.HasPrefix(got, fmt.Sprintf("%.1f images/s", r.SteadyImagesPerS)) || !strings.Contains(got, "steady state") {
		t.Errorf("throughput row %q: want the steady state, %.1f images/s", got, r.SteadyImagesPerS)
	}
	if got := rows["first epoch"]; !strings.HasPrefix(got, fmt.Sprintf("%.1f images/s", e[0].ImagesPerS)) {
		t.Errorf("first epoch row %q", got)
	}
	if got := rows["overall"]; !strings.HasPrefix(got, fmt.Sprintf("%.1f images/s", r.ImagesPerS)) || !strings.Contains(got, "loader creation") {
		t.Errorf("overall row %q", got)
	}
	if !strings.HasPrefix(rows["loader"], "created in") {
		t.Errorf("no loader creation row:\n%s", out.String())
	}

	one := benchJSON(t, dir, "--workers", "2")
	if one.SteadyImagesPerS != one.Epochs[0].ImagesPerS {
		t.Errorf("one epoch: steady %v, the epoch's %v", one.SteadyImagesPerS, one.Epochs[0].ImagesPerS)
	}
}

// The autotune row names only the settings that changed, and says when none did.
func TestAutotuneLine(t *testing.T) {
	start := settings{Workers: 2, IOWorkers: 4, Prefetch: 2}
	for _, c := range []struct {
		end  tuned
		want string
	}{
		{tuned{Workers: 4, IOWorkers: 4, Prefetch: 2, Steps: 3, CPULimit: 2},
			"workers 2 → 4 (reads in flight 4, batches in flight 2 kept); 3 changes, CPU limit 2 cores"},
		{tuned{Workers: 2, IOWorkers: 4, Prefetch: 2, Steps: 2, CPULimit: 2},
			"kept workers 2, reads in flight 4, batches in flight 2 (2 changes tried and undone); CPU limit 2 cores"},
		{tuned{Workers: 2, IOWorkers: 4, Prefetch: 2, CPULimit: 2},
			"no change: kept workers 2, reads in flight 4, batches in flight 2; CPU limit 2 cores"},
		{tuned{Workers: 3, IOWorkers: 6, Prefetch: 3, Steps: 1, CPULimit: 1.5},
			"workers 2 → 3, reads in flight 4 → 6, batches in flight 2 → 3; 1 change, CPU limit 1.5 cores"},
	} {
		if got := autotuneLine(start, &c.end); got != c.want {
			t.Errorf("%+v:\n got %s\nwant %s", c.end, got, c.want)
		}
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 classes", 1: "1 class", 2: "2 classes"} {
		if got := plural(n, "class"); got != want {
			t.Errorf("plural(%d): %q, want %q", n, got, want)
		}
	}
	if got := plural(1, "shard"); got != "1 shard" {
		t.Errorf("plural(1, shard) = %q", got)
	}
}

// One class, one sample: singular nouns in the report.
func TestBenchReportSingular(t *testing.T) {
	res := &benchResult{Dataset: "d", Samples: 1, Classes: 1}
	res.Epochs = []epochResult{{Images: 1, Seconds: 1, ImagesPerS: 1}}
	res.Memory.PinnedBuffers = 1
	res.ObjStore = &objStats{Requests: 1, Retries: 1, Hits: 1, Misses: 1, Fetched: 1}
	var out bytes.Buffer
	printReport(&out, res)
	for _, want := range []string{"1 sample, 1 class,", "1 buffer of", "1 request,", "1 retry;", "1 hit, 1 miss, 1 shard fetched"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
}

// Every command's --help gives each flag's default once.
func TestHelpDefaultsOnce(t *testing.T) {
	for name, cmd := range commands {
		var out bytes.Buffer
		cmd([]string{"--help"}, &out, io.Discard)
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.Count(l, "default") > 1 {
				t.Errorf("conveyor %s --help: %q", name, strings.TrimSpace(l))
			}
		}
	}
}

// A value the flag package cannot parse is named with what the flag wants.
func TestFlagParseErrors(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{"--size abc", `invalid value "abc" for flag --size: want a whole number, such as 224`},
		{"--cpu-limit x", `invalid value "x" for flag --cpu-limit: want a number, such as 0`},
		{"--step 3", `invalid value "3" for flag --step: want a duration such as 30ms, 2s or 1m30s`},
		{"--json=yes", `invalid boolean value "yes" for --json: want true or false`},
	} {
		err := benchTo(strings.Fields(c.args), io.Discard, io.Discard)
		if err == nil || err.Error() != c.want {
			t.Errorf("bench %s: %v, want %s", c.args, err, c.want)
		}
	}
}

// A sweep's header names the settings each run starts with, as its table does: the
// prefetch the loader chose, not 0.
func TestBenchSweepHeader(t *testing.T) {
	dir := smallTree(t, 6)
	t.Chdir(t.TempDir())
	var out bytes.Buffer
	if err := benchTo([]string{dir, "--size", "32", "--batch", "4", "--workers", "1,2"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var headers, rows []string
	table := false
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Fields(l)
		switch {
		case strings.HasPrefix(l, "conveyor workers="):
			headers = append(headers, strings.Join(f[1:4], " "))
			if !strings.Contains(l, "(prefetch tuned during the run, from these)") {
				t.Errorf("header %q does not say prefetch is tuned", l)
			}
		case len(f) > 0 && f[0] == "workers":
			table = true
		case table && len(f) > 3 && f[0] >= "0" && f[0] <= "9":
			rows = append(rows, fmt.Sprintf("workers=%s prefetch=%s batch=%s", f[0], f[1], f[2]))
		}
	}
	if len(headers) != 2 || strings.Join(headers, "|") != strings.Join(rows, "|") {
		t.Errorf("headers %q, table rows %q\n%s", headers, rows, out.String())
	}
}

// Ceilings that rise as stages are added carry a noise warning naming both.
func TestCeilingNoise(t *testing.T) {
	cs := []ceiling{{Stage: "read", ImagesPerS: 5000}, {Stage: "decode", ImagesPerS: 400}, {Stage: "augment", ImagesPerS: 420}, {Stage: "all", ImagesPerS: 390}}
	got := ceilingNoise(cs)
	if len(got) != 1 || !strings.HasPrefix(got[0], "read+decode+augment's ceiling (420.0 images/s) is 5% above read+decode's (400.0)") {
		t.Errorf("noise %q", got)
	}
	if got := ceilingNoise([]ceiling{{Stage: "read", ImagesPerS: 5000}, {Stage: "decode", ImagesPerS: 400}, {Stage: "all", ImagesPerS: 390}}); len(got) != 0 {
		t.Errorf("monotonic ceilings: noise %q", got)
	}
	res := &benchResult{Ceilings: cs, Noise: ceilingNoise(cs)}
	var out bytes.Buffer
	printCeilings(&out, res)
	if !strings.Contains(out.String(), "\nnoise: read+decode+augment's ceiling") || !strings.Contains(out.String(), "read+decode+augment  420.0") {
		t.Errorf("table:\n%s", out.String())
	}
}

// screen is what a terminal shows after text: \r returns to the line's start, ESC[K
// clears to its end, other characters overwrite.
func screen(text string) []string {
	lines := []string{""}
	col := 0
	for i := 0; i < len(text); i++ {
		cur := &lines[len(lines)-1]
		switch {
		case text[i] == '\n':
			lines, col = append(lines, ""), 0
		case text[i] == '\r':
			col = 0
		case strings.HasPrefix(text[i:], "\x1b[K"):
			*cur = (*cur)[:col]
			i += 2
		default:
			if col < len(*cur) {
				*cur = (*cur)[:col] + text[i:i+1] + (*cur)[col+1:]
			} else {
				*cur += text[i : i+1]
			}
			col++
		}
	}
	return lines
}

// On a terminal, where stdout and stderr share the screen, the epoch lines are never on
// the progress bar's line.
func TestBenchProgressOwnLine(t *testing.T) {
	dir := smallTree(t, 40)
	defer func(f func(io.Writer) bool) { isTerminal = f }(isTerminal)
	isTerminal = func(io.Writer) bool { return true }
	var tty syncBuffer
	if err := benchTo([]string{dir, "--size", "32", "--batch", "40", "--epochs", "2", "--step", "300ms"}, &tty, &tty); err != nil {
		t.Fatal(err)
	}
	epochs := 0
	for _, l := range screen(tty.String()) {
		if i := strings.Index(l, "conveyor epoch="); i >= 0 {
			epochs++
			if i > 0 {
				t.Errorf("epoch line shares a line: %q", l)
			}
		}
	}
	if epochs != 2 || !strings.Contains(tty.String(), "img/s") {
		t.Errorf("%d epoch lines, bar drawn %t:\n%q", epochs, strings.Contains(tty.String(), "img/s"), tty.String())
	}
}

// Without a terminal, bench writes a progress line every progressLineEvery.
func TestBenchProgressLines(t *testing.T) {
	dir := smallTree(t, 40)
	defer func(f func(io.Writer) bool, d time.Duration) { isTerminal, progressLineEvery = f, d }(isTerminal, progressLineEvery)
	isTerminal = func(io.Writer) bool { return false }
	progressLineEvery = 250 * time.Millisecond
	var stderr syncBuffer
	if err := benchTo([]string{dir, "--size", "32", "--batch", "20", "--step", "300ms"}, io.Discard, &stderr); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.HasPrefix(l, "conveyor: ") && strings.Contains(l, "/80 images (") && strings.Contains(l, "img/s") {
			lines = append(lines, l)
		}
	}
	if len(lines) < 2 || strings.Contains(stderr.String(), "\r") {
		t.Errorf("want progress lines every 250ms over ~1.2 s, without \\r; stderr:\n%q", stderr.String())
	}
}

// scrapeUntil reads the metrics address a bench running in the background logs to
// stderr and scrapes it until a line matches want (the served counters are the running
// loader's), then waits for the bench to end with errc. It returns the URL.
func scrapeUntil(t *testing.T, stderr *syncBuffer, errc <-chan error, want string) string {
	t.Helper()
	re := regexp.MustCompile(`serving Prometheus metrics at (http://\S+/metrics)`)
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
		}
	}
	if url == "" {
		t.Fatalf("no address logged: %q", stderr.String())
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	wantRe := regexp.MustCompile(want)
	scraped := false
	for deadline := time.Now().Add(10 * time.Second); !scraped && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("scraping %s while the bench runs: %v", url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		scraped = wantRe.Match(body)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !scraped {
		t.Errorf("no %q in the metrics served", want)
	}
	return url
}

// --metrics-addr on a dataset in object storage serves its shard cache's counters too.
func TestBenchMetricsAddrS3(t *testing.T) {
	s3test.Each(t, func(t *testing.T, srv *s3test.Server) {
		_, shards := wdsShards(t, [][2]int{{0, 6}, {6, 12}})
		for _, name := range shards {
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			srv.Put(t, "wds/"+filepath.Base(name), data)
		}
		srv.Env(t, "")
		var stderr syncBuffer
		errc := make(chan error, 1)
		go func() {
			errc <- benchTo([]string{srv.URL("wds/train-{00..01}.tar"), "--size", "32", "--batch", "4", "--step", "200ms", "--shard-cache", t.TempDir(),
				"--metrics-addr", "127.0.0.1:0"}, io.Discard, &stderr)
		}()
		scrapeUntil(t, &stderr, errc, `\nconveyor_objstore_requests_total [1-9]`)
	})
}

// syncBuffer is a bytes.Buffer safe for the writes of several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// --on-error fail: the bad sample's error is the command's, printed once, not logged too.
func TestBenchOnErrorFailOnce(t *testing.T) {
	dir := smallTree(t, 4)
	if err := os.WriteFile(filepath.Join(dir, "class00", "zz-bad.jpg"), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	err := benchTo([]string{dir, "--size", "32", "--batch", "3", "--on-error", "fail"}, io.Discard, &stderr)
	if err == nil || !strings.Contains(err.Error(), "zz-bad.jpg") {
		t.Fatalf("error %v, want one naming zz-bad.jpg", err)
	}
	if strings.Contains(stderr.String(), "zz-bad.jpg") {
		t.Errorf("the bad sample is logged as well as returned:\n%s", stderr.String())
	}
	// --on-error skip still logs it.
	var skip syncBuffer
	if err := benchTo([]string{dir, "--size", "32", "--batch", "3", "--max-bad", "-1"}, io.Discard, &skip); err != nil || !strings.Contains(skip.String(), "zz-bad.jpg") {
		t.Errorf("skip: %v, stderr %q", err, skip.String())
	}
}

// --metrics-addr serves the running loader's metrics while the bench runs, and stops at
// its end.
func TestBenchMetricsAddr(t *testing.T) {
	dir := smallTree(t, 20)
	var stderr syncBuffer
	errc := make(chan error, 1)
	go func() {
		errc <- benchTo([]string{dir, "--size", "32", "--batch", "4", "--step", "100ms", "--metrics-addr", "127.0.0.1:0"}, io.Discard, &stderr)
	}()
	url := scrapeUntil(t, &stderr, errc, `\nconveyor_loader_batches_total [1-9]`)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if _, err := client.Get(url); err == nil {
		t.Errorf("%s still served after the bench ended", url)
	}
	if err := benchTo([]string{dir, "--metrics-addr", "bad:addr:1"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "--metrics-addr") {
		t.Errorf("bad address: %v", err)
	}
}

// The sweep plot's title fits its width, however long the dataset's name.
func TestPlotTitleFits(t *testing.T) {
	res := &benchResult{Dataset: "s3://my-training-bucket/imagenet/train/" + strings.Repeat("x", 200) + "-{000000..001023}.tar", Recipe: "randaugment", Sweep: []string{"prefetch"}}
	sty := plot.New().Title.TextStyle
	for _, l := range strings.Split(plotTitle(res), "\n") {
		if w := sty.Width(l); w > plotWidth-2*plotMargin {
			t.Errorf("title line %q is %v wide, the plot %v", l, w, plotWidth)
		}
	}
}

// Point values never overlap one another or another point: one too close goes below its
// point, or is left out.
func TestPlaceLabels(t *testing.T) {
	p := plot.New()
	p.Y.Min, p.Y.Max = 0, 800
	da := draw.New(vgimg.New(plotWidth, plotHeight))
	da = p.DataCanvas(da)
	var labels []pointLabel
	for _, y := range []float64{388, 349, 340, 700, 100} { // at x 2, three within a label's height
		labels = append(labels, pointLabel{xy: plotter.XY{X: 2, Y: y}})
	}
	labels = append(labels, pointLabel{xy: plotter.XY{X: 1, Y: 389}})
	spans, err := placeLabels(p, da, labels)
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) < 4 {
		t.Errorf("%d of 6 labels placed", len(spans))
	}
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.overlaps(b) {
				t.Errorf("labels overlap: %+v and %+v", a, b)
			}
		}
		for _, l := range labels {
			y := da.Min.Y + vg.Length(l.xy.Y/800)*da.Size().Y
			if a.overlaps(labelSpan{vg.Length(l.xy.X), y - 3, y + 3}) {
				t.Errorf("label %+v covers the point %v", a, l.xy)
			}
		}
	}
}
