package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/synth"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// badTree writes a 3-class ImageFolder tree of 24 small JPEGs plus two bad files, and
// returns its directory and the bad files' paths.
func badTree(t *testing.T) (string, []string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "src")
	files, err := synth.WriteTree(dir, &synth.TreeOptions{Classes: 3, PerClass: 8, Seed: 1, MinSide: 40, MaxSide: 96})
	if err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, 3000)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range junk {
		junk[i] = byte(r.Uint32())
	}
	whole, err := os.ReadFile(files[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	bad := []string{filepath.Join(dir, "class01", "corrupt.jpg"), filepath.Join(dir, "class02", "truncated.jpg")}
	for i, data := range [][]byte{junk, whole[:len(whole)/2]} {
		if err := os.WriteFile(bad[i], data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, bad
}

// runConvert runs conveyor convert and returns its stdout and stderr.
func runConvert(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := convert(args, &out, &errOut)
	return out.String(), errOut.String(), err
}

// converted returns an ImageFolder tree with two bad files and its conversion.
func converted(t *testing.T) (src, dst string, bad []string) {
	t.Helper()
	src, bad = badTree(t)
	dst = filepath.Join(t.TempDir(), "dst")
	if out, stderr, err := runConvert(t, src, dst, "--size", "32", "--workers", "3"); err != nil {
		t.Fatalf("convert: %v\n%s%s", err, out, stderr)
	}
	return src, dst, bad
}

func TestConvert(t *testing.T) {
	src, bad := badTree(t)
	dst := filepath.Join(t.TempDir(), "dst")
	out, stderr, err := runConvert(t, src, dst, "--size", "32", "--workers", "3")
	if err != nil {
		t.Fatalf("convert: %v\n%s", err, stderr)
	}
	report := filepath.Join(dst, reportName)
	for _, want := range []string{"stored=24 ", "skipped=0 ", "bad=2 ", "images_per_s=", "bytes=", "report=" + report} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(stderr, "\r") {
		t.Errorf("progress bar drawn on a non-terminal:\n%q", stderr)
	}
	for _, b := range bad {
		if !strings.Contains(stderr, filepath.Base(b)) {
			t.Errorf("stderr does not log bad file %s:\n%s", b, stderr)
		}
	}

	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if !strings.HasPrefix(lines[0], "# conveyor convert ") || !strings.Contains(lines[0], "26 files") || !strings.Contains(lines[0], "2 bad") {
		t.Errorf("report header %q", lines[0])
	}
	var listed []string
	for _, l := range lines[1:] {
		path, msg, ok := strings.Cut(l, "\t")
		if !ok || msg == "" {
			t.Errorf("report line %q is not path<TAB>error", l)
		}
		listed = append(listed, path)
	}
	slices.Sort(listed)
	if !slices.Equal(listed, bad) {
		t.Errorf("report lists %q, want %q", listed, bad)
	}

	info, err := cache.ReadInfo(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Complete || info.Samples != 26 || info.Stored != 24 || info.Bad != 2 || info.Codec != cache.S2 || len(info.Classes) != 3 {
		t.Errorf("dataset.json: %+v", info)
	}
	if !strings.Contains(info.Spec, "resize=shorter(32)") {
		t.Errorf("spec %q: not resized to shorter side 32", info.Spec)
	}

	// A rerun skips what is stored, tries the bad files again and rewrites the report.
	out, _, err = runConvert(t, src, dst, "--size", "32")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "stored=0 skipped=24 bad=2 ") {
		t.Errorf("rerun summary:\n%s", out)
	}
	if data, _ := os.ReadFile(report); strings.Count(string(data), "\n") != 3 {
		t.Errorf("rerun report:\n%s", data)
	}
}

func TestConvertClean(t *testing.T) {
	src := t.TempDir()
	if _, err := synth.WriteTree(src, &synth.TreeOptions{Classes: 2, PerClass: 3, Seed: 2, MinSide: 20, MaxSide: 40}); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	// Flags after the positional arguments, full size, another codec.
	out, _, err := runConvert(t, src, dst, "--size", "0", "--codec", "zstd", "--decoder", "go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "stored=6 skipped=0 bad=0 ") || strings.Contains(out, "report=") {
		t.Errorf("summary:\n%s", out)
	}
	info, err := cache.ReadInfo(dst)
	if err != nil {
		t.Fatal(err)
	}
	if info.Codec != cache.Zstd || !strings.Contains(info.Spec, "resize=none") || !strings.Contains(info.Spec, "backend=go") {
		t.Errorf("dataset.json: %+v", info)
	}
	if data, err := os.ReadFile(filepath.Join(dst, reportName)); err != nil || strings.Count(string(data), "\n") != 1 {
		t.Errorf("report of a clean run (%v):\n%s", err, data)
	}
}

func TestConvertProgressBar(t *testing.T) {
	defer func(f func(io.Writer) bool) { isTerminal = f }(isTerminal)
	isTerminal = func(io.Writer) bool { return true }
	src, _ := badTree(t)
	_, stderr, err := runConvert(t, src, t.TempDir(), "--size", "32", "--workers", "2")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "\r[") || !strings.Contains(stderr, "26/26 100.0%") || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("no finished progress bar:\n%q", stderr)
	}
	// Log lines start on a line of their own, the bar cleared first.
	for _, l := range strings.Split(stderr, "\n") {
		if i := strings.Index(l, "pipeline: bad sample"); i >= 0 && !strings.HasSuffix(l[:i], "\r\x1b[K") && i != 0 {
			t.Errorf("log line tears the bar: %q", l)
		}
	}
}

func TestConvertFull(t *testing.T) {
	src := t.TempDir()
	if _, err := synth.WriteTree(src, &synth.TreeOptions{Classes: 2, PerClass: 10, Seed: 3, MinSide: 60, MaxSide: 64}); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	out, _, err := runConvert(t, src, dst, "--size", "0", "--codec", "raw", "--max-bytes", "20k", "--workers", "1")
	if !errors.Is(err, cache.ErrFull) {
		t.Fatalf("error %v, want cache.ErrFull", err)
	}
	if !strings.Contains(out, "conveyor convert stored=") {
		t.Errorf("no summary:\n%s", out)
	}
	if info, err := cache.ReadInfo(dst); err != nil || info.Complete {
		t.Errorf("dataset.json of a stopped conversion: %+v, %v", info, err)
	}
}

func TestConvertErrors(t *testing.T) {
	src := t.TempDir()
	if _, err := synth.WriteTree(src, &synth.TreeOptions{Classes: 1, PerClass: 1, MinSide: 8, MaxSide: 8}); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "dst")
	for _, args := range [][]string{
		{},
		{src},
		{src, dst, "extra"},
		{src, dst, "--codec", "gif"},
		{src, dst, "--size", "-1"},
		{src, dst, "--workers", "0"},
		{src, dst, "--quality", "101"},
		{src, dst, "--decoder", "magic"},
		{src, dst, "--max-bytes", "lots"},
		{src, filepath.Join(src, "cache")},
		{filepath.Join(t.TempDir(), "nonexistent"), dst},
	} {
		if _, _, err := runConvert(t, args...); err == nil {
			t.Errorf("convert %q: no error", args)
		}
	}
	if _, err := os.Stat(dst); err == nil {
		t.Errorf("a failed convert created %s", dst)
	}
}

func TestInspect(t *testing.T) {
	_, dst, _ := converted(t)
	var out bytes.Buffer
	if err := inspect([]string{dst}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"directory     " + dst, "codec         s2", "24 stored of 26 listed, 2 bad", "complete      true",
		"classes       3 (", "class00 (8)", "resize=shorter(32)", "image sizes   min "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("inspect lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	if err := inspect([]string{"--json", dst}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var res inspectResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out.String())
	}
	if !res.Dataset || res.Samples != 24 || res.Listed != 26 || res.Bad != 2 || res.Codec != "s2" || !res.Complete ||
		res.FormatVersion != cache.FormatVersion || res.Sizes == nil || res.Bytes <= 0 || res.BytesPerSample <= 0 || len(res.Specs) != 1 {
		t.Errorf("inspect --json: %s", out.String())
	}
	var names []string
	total := 0
	for _, c := range res.Classes {
		names = append(names, c.Name)
		total += c.Samples
	}
	if !slices.Equal(names, []string{"class00", "class01", "class02"}) || total != 24 {
		t.Errorf("classes %+v", res.Classes)
	}
}

func TestInspectErrors(t *testing.T) {
	for _, args := range [][]string{{}, {t.TempDir()}, {filepath.Join(t.TempDir(), "nonexistent")}, {"a", "b"}} {
		if err := inspect(args, io.Discard, io.Discard); err == nil {
			t.Errorf("inspect %q: no error", args)
		}
	}
}

func TestVerify(t *testing.T) {
	_, dst, _ := converted(t)
	var out bytes.Buffer
	if err := verify([]string{dst}, &out, io.Discard); err != nil {
		t.Fatalf("verify of a fresh conversion: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "records=24 ") || !strings.Contains(out.String(), "damaged=0 ") {
		t.Errorf("verify:\n%s", out.String())
	}

	shards, _ := filepath.Glob(filepath.Join(dst, "*.shard"))
	if len(shards) != 1 {
		t.Fatalf("shards %q, want one", shards)
	}
	data, err := os.ReadFile(shards[0])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40
	if err := os.WriteFile(shards[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	want := damagedPaths(t, dst)
	if len(want) != 1 {
		t.Fatalf("flipping one byte damaged %q", want)
	}

	out.Reset()
	err = verify([]string{dst}, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), want[0]) {
		t.Errorf("verify error %v does not name %s", err, want[0])
	}
	if !strings.Contains(out.String(), "damaged=1 ") || !strings.Contains(out.String(), "damaged "+shards[0]+"+") {
		t.Errorf("verify:\n%s", out.String())
	}
}

// damagedPaths reads every record of the converted dataset in dir directly and returns
// the source paths of those that fail.
func damagedPaths(t *testing.T, dir string) []string {
	t.Helper()
	c, err := cache.Open(dir, &cache.Options{ReadOnly: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	info, err := cache.ReadInfo(dir)
	if err != nil {
		t.Fatal(err)
	}
	coder := c.NewCoder()
	defer coder.Close()
	var img decode.Image
	var bad []string
	for _, r := range c.Records(info.Spec) {
		if _, err := coder.Load(&img, r); err != nil {
			bad = append(bad, r.Path)
		}
	}
	return bad
}

func TestVerifyTornTail(t *testing.T) {
	_, dst, _ := converted(t)
	shards, _ := filepath.Glob(filepath.Join(dst, "*.shard"))
	f, err := os.OpenFile(shards[0], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(make([]byte, 10)) // a record header cut short
	f.Close()
	var out bytes.Buffer
	if err := verify([]string{dst}, &out, io.Discard); err != nil {
		t.Errorf("a torn tail is not damage: %v", err)
	}
	if !strings.Contains(out.String(), "unreadable_bytes=10 torn_shards=1") {
		t.Errorf("verify:\n%s", out.String())
	}
}

func TestBenchConverted(t *testing.T) {
	_, dst, _ := converted(t)
	var out bytes.Buffer
	if err := bench([]string{dst, "--epochs", "1", "--json", "--size", "16", "--batch", "4", "--workers", "2"}, &out); err != nil {
		t.Fatal(err)
	}
	var res benchResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out.String())
	}
	if res.Images != 24 || res.Backend != "cache:s2" || res.BadSamples != 0 {
		t.Errorf("bench on a converted set: %s", out.String())
	}
	if err := bench([]string{dst, "--cache", t.TempDir()}, io.Discard); err == nil {
		t.Error("bench with --cache on a converted set: no error")
	}
}

// --order shards over a converted dataset reads its shard files (ByShard), not
// one-sample shards: the default shuffle block is 4 mean shards, not 4 samples.
func TestBenchConvertedShardOrder(t *testing.T) {
	_, dst, _ := converted(t)
	var out bytes.Buffer
	if err := bench([]string{dst, "--epochs", "1", "--json", "--size", "16", "--batch", "4", "--workers", "2", "--order", "shards"}, &out); err != nil {
		t.Fatal(err)
	}
	var res benchResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out.String())
	}
	var block int
	if i := strings.Index(res.Config, "shuffle_block="); i >= 0 {
		fmt.Sscanf(res.Config[i:], "shuffle_block=%d", &block)
	}
	if res.Images != 24 || block <= 4 {
		t.Errorf("bench --order shards on a converted set: images %d, config %s", res.Images, res.Config)
	}
}

func TestBenchCache(t *testing.T) {
	src := t.TempDir()
	if _, err := synth.WriteTree(src, &synth.TreeOptions{Classes: 2, PerClass: 9, Seed: 1, MinSide: 40, MaxSide: 80}); err != nil {
		t.Fatal(err)
	}
	cdir := filepath.Join(t.TempDir(), "cache")
	args := []string{src, "--cache", cdir, "--cache-fill", "1", "--epochs", "2", "--size", "16", "--batch", "4", "--workers", "2"}
	var out bytes.Buffer
	if err := bench(append(args, "--json"), &out); err != nil {
		t.Fatal(err)
	}
	var res benchResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out.String())
	}
	if len(res.Epochs) != 2 || res.Epochs[0].CacheStored != 18 || res.Epochs[1].CacheHits != 18 ||
		res.CacheHits != 18 || res.CacheStored != 18 || res.Cache == nil || res.Cache.Records != 18 || res.Cache.Bytes <= 0 {
		t.Errorf("bench --cache: %s", out.String())
	}

	// Text: per-epoch hits, and the cache line; every sample is a hit now.
	out.Reset()
	if err := bench(args, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "epoch=0 images=18 ") || strings.Count(out.String(), "cache_hits=18 cache_stored=0") != 2 ||
		!strings.Contains(out.String(), "conveyor cache hits=36 stored=0 ") {
		t.Errorf("bench --cache:\n%s", out.String())
	}

	// inspect and verify work on a loader's cache, without dataset.json.
	out.Reset()
	if err := inspect([]string{cdir, "--json"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var ir inspectResult
	if err := json.Unmarshal(out.Bytes(), &ir); err != nil {
		t.Fatal(err)
	}
	if ir.Dataset || ir.Records != 18 || len(ir.Specs) != 1 || ir.Specs[0].Records != 18 || ir.Specs[0].Labels != 2 {
		t.Errorf("inspect of a loader cache: %s", out.String())
	}
	out.Reset()
	if err := inspect([]string{cdir}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "18 records, codec s2, 2 labels") {
		t.Errorf("inspect of a loader cache (%v):\n%s", err, out.String())
	}
	if err := verify([]string{cdir}, io.Discard, io.Discard); err != nil {
		t.Error(err)
	}
}

func TestProgressLine(t *testing.T) {
	for _, tc := range []struct {
		name  string
		p     pipeline.ConvertReport
		width int
		want  []string
		fill  float64 // share of the bar filled; -1: no bar
	}{
		{"start", pipeline.ConvertReport{Total: 5000}, 80, []string{" 0/5000   0.0% ", "0 img/s", "ETA --", "bad 0"}, 0},
		{"quarter", pipeline.ConvertReport{Total: 5000, Done: 1250, Stored: 1240, Bad: 10, Elapsed: 5 * time.Second},
			80, []string{"1250/5000  25.0%", "250 img/s", "ETA 15s", "bad 10"}, 0.25},
		{"resumed", pipeline.ConvertReport{Total: 1000, Done: 600, Skipped: 500, Stored: 100, Elapsed: 10 * time.Second},
			100, []string{"600/1000  60.0%", "10 img/s", "ETA 40s"}, 0.6},
		{"slow", pipeline.ConvertReport{Total: 1000000, Done: 1000, Stored: 1000, Elapsed: 10 * time.Second},
			80, []string{"ETA 2h46m"}, 0.001},
		{"done", pipeline.ConvertReport{Total: 24, Done: 24, Stored: 22, Bad: 2, Elapsed: time.Second},
			60, []string{"24/24 100.0%", "ETA 0s", "bad 2"}, 1},
		{"narrow", pipeline.ConvertReport{Total: 100, Done: 50, Stored: 50, Elapsed: time.Second}, 40, []string{"50/100"}, -1},
		{"tiny", pipeline.ConvertReport{Total: 100, Done: 50, Stored: 50, Elapsed: time.Second}, 12, []string{"50/100"}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := progressLine(convertState(tc.p), tc.width)
			if len(line) >= tc.width {
				t.Errorf("%q: %d columns, want fewer than %d", line, len(line), tc.width)
			}
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("%q lacks %q", line, w)
				}
			}
			open, end := strings.IndexByte(line, '['), strings.IndexByte(line, ']')
			if tc.fill < 0 {
				if open >= 0 {
					t.Errorf("%q: a bar with no room for it", line)
				}
				return
			}
			if open != 0 || end < 0 {
				t.Fatalf("%q: no bar", line)
			}
			bar := line[1:end]
			filled := len(strings.TrimRight(bar, " "))
			if got := float64(filled) / float64(len(bar)); got < tc.fill-0.05 || got > tc.fill+0.05 {
				t.Errorf("%q: %.2f of the bar filled, want %.2f", line, got, tc.fill)
			}
			if arrow := strings.Count(bar, ">"); filled == len(bar) && arrow != 0 || filled > 0 && filled < len(bar) && (arrow != 1 || bar[filled-1] != '>') {
				t.Errorf("%q: arrow misplaced", line)
			}
		})
	}
}

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  []string
		size int
	}{
		{[]string{"a", "b"}, []string{"a", "b"}, 256},
		{[]string{"a", "--size", "1", "b"}, []string{"a", "b"}, 1},
		{[]string{"--size=2", "a", "b"}, []string{"a", "b"}, 2},
		{[]string{"a", "b", "-size", "3"}, []string{"a", "b"}, 3},
		{[]string{"a", "--", "--size", "4"}, []string{"a", "--size", "4"}, 256},
	} {
		fs := flagSet()
		size := fs.Int("size", 256, "")
		pos, err := parseArgs(fs, tc.args)
		if err != nil || !slices.Equal(pos, tc.pos) || *size != tc.size {
			t.Errorf("parseArgs(%q) = %q, size %d, %v; want %q, size %d", tc.args, pos, *size, err, tc.pos, tc.size)
		}
	}
}

func TestByteSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"1234", 1234}, {"20k", 20000}, {"500M", 500e6}, {"1.5G", 1.5e9}, {"2T", 2e12},
		{"1Ki", 1024}, {"3Gi", 3 << 30}, {"200GB", 200e9}, {"4GiB", 4 << 30},
	} {
		var b byteSize
		if err := b.Set(tc.in); err != nil || int64(b) != tc.want {
			t.Errorf("%q: %d, %v; want %d", tc.in, b, err, tc.want)
		}
	}
	for _, in := range []string{"", "x", "-1", "1X", "1e30"} {
		var b byteSize
		if err := b.Set(in); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

func flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}
