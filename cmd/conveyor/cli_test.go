package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/internal/synth"
)

// runCLI runs the command line args in-process, as main does, and returns its exit status
// and what it printed.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// layoutTrees makes, in a fresh working directory, the folders the dataset-path errors are
// about: photos/ (images, no class folders), empty/, noimages/ (class folders without
// images), file.jpg (not a folder).
func layoutTrees(t *testing.T) {
	t.Helper()
	t.Chdir(t.TempDir())
	files, err := synth.WriteTree("tree", &synth.TreeOptions{Classes: 1, PerClass: 2, Seed: 1, MinSide: 16, MaxSide: 24})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"photos", "empty", "noimages/cat/sub", "noimages/dog/.hidden"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		if err := os.Rename(f.Path, filepath.Join("photos", filepath.Base(f.Path))); err != nil {
			t.Fatal(err)
		}
	}
	// Neither a file without an image extension nor an image in a hidden folder is listed.
	for _, name := range []string{"noimages/cat/sub/notes.txt", "noimages/dog/.hidden/x.jpg"} {
		if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile("file.jpg", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}

const layoutHint = "expected an ImageFolder tree DIR/CLASS/*.jpg (one folder per class)"

// TestDatasetPathErrors: every error about a dataset path names it as the user typed it,
// and a folder that is not an ImageFolder tree says what layout is expected.
func TestDatasetPathErrors(t *testing.T) {
	layoutTrees(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "/nonexistent"}, "conveyor bench: /nonexistent: no such file or directory"},
		{[]string{"bench", "no/such/dir/"}, "conveyor bench: no/such/dir/: no such file or directory"},
		{[]string{"bench", "photos/"}, "conveyor bench: source: image folder photos/: no class folders, only 2 images directly inside; " + layoutHint},
		{[]string{"bench", "./empty"}, "conveyor bench: source: image folder ./empty: no class folders; " + layoutHint},
		{[]string{"bench", "noimages"}, "conveyor bench: source: image folder noimages: no image files in its 2 class folders (.jpg .jpeg .png .gif .bmp .tif .tiff .webp); " + layoutHint},
		{[]string{"bench", "file.jpg"}, "conveyor bench: file.jpg: not a folder, a manifest (.csv, .jsonl, .ndjson) or a .tar shard"},
		{[]string{"convert", "/nonexistent", "out"}, "conveyor convert: /nonexistent: no such file or directory"},
		{[]string{"convert", "photos/", "out"}, "conveyor convert: source: image folder photos/: no class folders, only 2 images directly inside; " + layoutHint},
		{[]string{"convert", "noimages", "out"}, "conveyor convert: source: image folder noimages: no image files in its 2 class folders (.jpg .jpeg .png .gif .bmp .tif .tiff .webp); " + layoutHint},
		{[]string{"convert", "file.jpg", "out"}, "conveyor convert: file.jpg: not a directory"},
		{[]string{"inspect", "/nonexistent"}, "conveyor inspect: /nonexistent: no such file or directory"},
		{[]string{"inspect", "file.jpg"}, "conveyor inspect: file.jpg: not a folder, a manifest (.csv, .jsonl, .ndjson) or a .tar shard"},
		{[]string{"inspect", "photos/"}, "conveyor inspect: source: image folder photos/: no class folders, only 2 images directly inside; " + layoutHint + notCacheHint},
		{[]string{"verify", "/nonexistent"}, "conveyor verify: /nonexistent: no such file or directory"},
		{[]string{"verify", "empty"}, "conveyor verify: source: image folder empty: no class folders; " + layoutHint + notCacheHint},
		{[]string{"verify", "file.jpg"}, "conveyor verify: file.jpg: not a folder, a manifest (.csv, .jsonl, .ndjson) or a .tar shard"},
	} {
		code, stdout, stderr := runCLI(t, tc.args...)
		if code != 1 || stderr != tc.want+"\n" || stdout != "" {
			t.Errorf("%q: exit %d, stderr\n\t%q\nwant exit 1 and\n\t%q\nstdout %q", tc.args, code, stderr, tc.want+"\n", stdout)
		}
	}
	if _, err := os.Stat("out"); err == nil {
		t.Error("a failed convert created its DST")
	}
}

// TestUsageErrors: a usage error prints one line and where the usage is, and exits 2.
func TestUsageErrors(t *testing.T) {
	t.Chdir(t.TempDir())
	const (
		cmdHint = "Run 'conveyor help' (or 'conveyor %s --help') for usage."
		topHint = "Run 'conveyor help' for usage."
	)
	for _, tc := range []struct {
		args       []string
		line, hint string
	}{
		{nil, "conveyor: missing command (one of bench, convert, inspect, show, verify, version, help)", topHint},
		{[]string{"frob"}, `conveyor: unknown command "frob" (commands: bench, convert, inspect, show, verify, version, help)`, topHint},
		{[]string{"--frob"}, `conveyor: unknown command "--frob" (commands: bench, convert, inspect, show, verify, version, help)`, topHint},
		{[]string{"help", "frob"}, `conveyor: help: no command "frob" (commands: bench, convert, inspect, show, verify, version, help)`, topHint},
		{[]string{"version", "now"}, `conveyor version: version takes no arguments, got ["now"]`, topHint},
		{[]string{"bench", "--frob"}, "conveyor bench: unknown flag --frob", cmdHint},
		{[]string{"bench", "-frob=1"}, "conveyor bench: unknown flag --frob", cmdHint},
		{[]string{"bench", "--size"}, "conveyor bench: flag --size needs a value", cmdHint},
		{[]string{"bench", "--size", "big"}, `conveyor bench: invalid value "big" for flag --size: want a whole number, such as 224`, cmdHint},
		{[]string{"bench", "--normalize=maybe"}, `conveyor bench: invalid boolean value "maybe" for --normalize: want true or false`, cmdHint},
		{[]string{"bench", "--workers", "1,x"}, `conveyor bench: invalid value "1,x" for flag --workers: "x" is not a positive integer`, cmdHint},
		{[]string{"bench", "--workers", "0"}, `conveyor bench: invalid value "0" for flag --workers: "0" is not a positive integer`, cmdHint},
		{[]string{"bench", "--memory-budget", "lots"}, `conveyor bench: invalid value "lots" for flag --memory-budget: not a size in bytes: "lots" (want e.g. 500000000, 500M or 1.5Gi)`, cmdHint},
		{[]string{"bench", "a", "b"}, `conveyor bench: one DIR at most, got 2 arguments: ["a" "b"]`, cmdHint},
		{[]string{"bench", "--recipe", "nope"}, `conveyor bench: --recipe "nope": want one of train, eval, randaugment`, cmdHint},
		{[]string{"bench", "--dtype", "int7"}, `conveyor bench: --dtype: pack: unknown dtype "int7" (want uint8, float32, float16 or bfloat16)`, cmdHint},
		{[]string{"bench", "--layout", "chw"}, `conveyor bench: --layout: pack: unknown layout "chw" (want NCHW or NHWC)`, cmdHint},
		{[]string{"bench", "--cache-codec", "gif"}, `conveyor bench: --cache-codec: cache: unknown codec "gif" (have [raw s2 zstd jpeg])`, cmdHint},
		{[]string{"bench", "--size", "0"}, "conveyor bench: --size 0 < 1", cmdHint},
		{[]string{"bench", "--epochs", "0"}, "conveyor bench: --epochs 0 < 1", cmdHint},
		{[]string{"bench", "--step", "-1s"}, "conveyor bench: --step -1s < 0", cmdHint},
		{[]string{"bench", "--cache-fill", "2"}, "conveyor bench: --cache-fill 2 not in [0, 1]", cmdHint},
		{[]string{"bench", "--images", "3"}, "conveyor bench: --images 3: need at least 10", cmdHint},
		{[]string{"bench", "--on-error", "retry"}, `conveyor bench: --on-error "retry": want skip or fail`, cmdHint},
		{[]string{"bench", "--max-bad", "1.5"}, "conveyor bench: --max-bad 1.5 > 1 (a fraction of an epoch's samples; negative: no limit)", cmdHint},
		{[]string{"bench", "--max-bad", "some"}, `conveyor bench: invalid value "some" for flag --max-bad: want a number, such as 0.01`, cmdHint},
		{[]string{"bench", "--stages", "--workers", "1,2"}, "conveyor bench: --stages measures one configuration; sweep workers without it", cmdHint},
		{[]string{"bench", "--plot", "x.png"}, "conveyor bench: --plot draws a sweep: give --workers, --prefetch or --batch a list such as 1,2,4", cmdHint},
		{[]string{"convert"}, "conveyor convert: missing SRC and DST: want conveyor convert SRC DST", cmdHint},
		{[]string{"convert", "src"}, "conveyor convert: missing DST: want conveyor convert SRC DST", cmdHint},
		{[]string{"convert", "a", "b", "c"}, `conveyor convert: want SRC and DST, got 3 arguments: ["a" "b" "c"]`, cmdHint},
		{[]string{"convert", "a", "b", "--codec", "gif"}, `conveyor convert: --codec: cache: unknown codec "gif" (have [raw s2 zstd jpeg])`, cmdHint},
		{[]string{"convert", "a", "b", "--quality", "0"}, "conveyor convert: --quality 0 not in [1, 100]", cmdHint},
		{[]string{"convert", "a", "b", "--size", "-1"}, "conveyor convert: --size -1 < 0", cmdHint},
		{[]string{"convert", "a", "b", "--workers", "0"}, "conveyor convert: --workers 0 < 1", cmdHint},
		{[]string{"convert", "a", "b", "--size", "abc"}, `conveyor convert: invalid value "abc" for flag --size: want a whole number of pixels, e.g. 256 (0: full size)`, cmdHint},
		{[]string{"convert", "a", "b", "--quality", "high"}, `conveyor convert: invalid value "high" for flag --quality: want a whole number from 1 to 100, e.g. 90`, cmdHint},
		{[]string{"convert", "a", "b", "--workers", "many"}, `conveyor convert: invalid value "many" for flag --workers: want a whole number of workers, e.g. 4`, cmdHint},
		{[]string{"inspect", "s3://bucket/x", "--prune"}, "conveyor inspect: --prune deletes from a local converted dataset; s3://bucket/x is in object storage", cmdHint},
		{[]string{"convert", "a", "b", "--decoder", "fast"}, `conveyor convert: --decoder: decode: unknown backend "fast" (want "auto", "go" or "turbo")`, cmdHint},
		{[]string{"inspect"}, "conveyor inspect: missing DIR", cmdHint},
		{[]string{"inspect", "a", "b"}, `conveyor inspect: want one DIR, got 2 arguments: ["a" "b"]`, cmdHint},
		{[]string{"inspect", "a", "--yaml"}, "conveyor inspect: unknown flag --yaml", cmdHint},
		{[]string{"verify"}, "conveyor verify: missing DIR", cmdHint},
		{[]string{"verify", "a", "--json"}, "conveyor verify: unknown flag --json", cmdHint},
	} {
		code, stdout, stderr := runCLI(t, tc.args...)
		hint := tc.hint
		if hint == cmdHint {
			hint = strings.ReplaceAll(hint, "%s", tc.args[0])
		}
		want := tc.line + "\n" + hint + "\n"
		if code != 2 || stderr != want || stdout != "" {
			t.Errorf("%q: exit %d, stderr\n%s\nwant exit 2 and\n%s\nstdout %q", tc.args, code, stderr, want, stdout)
		}
	}
}

// TestHelp: --help, -h and conveyor help print the full usage on stdout and exit 0.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"help"}, []string{"usage: conveyor <command>", "bench [DATASET]", "convert SRC DST", "inspect DATASET", "verify DATASET", "version", "DIR/CLASS/*.jpg", "--allow-empty-classes"}},
		{[]string{"--help"}, []string{"usage: conveyor <command>"}},
		{[]string{"-h"}, []string{"usage: conveyor <command>"}},
		{[]string{"bench", "--help"}, []string{"usage: conveyor bench [DIR | SHARD.tar ... | URL] [flags]", "-shard-cache-max-bytes", "-on-error", "-max-bad", "-workers", "(default 0.01)"}},
		{[]string{"bench", "/nonexistent", "-h"}, []string{"usage: conveyor bench"}},
		{[]string{"help", "bench"}, []string{"usage: conveyor bench [DIR | SHARD.tar ... | URL] [flags]"}},
		{[]string{"convert", "-h"}, []string{"usage: conveyor convert SRC DST [flags]", "-codec"}},
		{[]string{"help", "convert"}, []string{"usage: conveyor convert SRC DST [flags]"}},
		{[]string{"inspect", "--help"}, []string{"usage: conveyor inspect DIR [--json]", "-json", "-prune", "-allow-empty-classes"}},
		{[]string{"verify", "-help"}, []string{"usage: conveyor verify DIR", "-allow-empty-classes"}},
		{[]string{"version", "--help"}, []string{"usage: conveyor version"}},
	} {
		code, stdout, stderr := runCLI(t, tc.args...)
		if code != 0 || stderr != "" {
			t.Errorf("%q: exit %d, stderr %q; want 0 and nothing", tc.args, code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%q: usage lacks %q:\n%s", tc.args, w, stdout)
			}
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		code, stdout, stderr := runCLI(t, args...)
		lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
		if code != 0 || stderr != "" || len(lines) != 3 {
			t.Fatalf("%q: exit %d, stderr %q, stdout\n%s", args, code, stderr, stdout)
		}
		// A test binary records its module as (devel) or a pseudo-version, and no VCS
		// revision; the Go version is the one running.
		if !strings.HasPrefix(lines[0], "conveyor ") || len(lines[0]) <= len("conveyor ") {
			t.Errorf("%q: module line %q", args, lines[0])
		}
		if !strings.HasPrefix(lines[1], "revision ") {
			t.Errorf("%q: revision line %q", args, lines[1])
		}
		if want := runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH; lines[2] != want {
			t.Errorf("%q: Go line %q, want %q", args, lines[2], want)
		}
	}
}

// TestBenchOnError: --on-error and --max-bad set the loader's bad-sample policy.
func TestBenchOnError(t *testing.T) {
	dir := smallTree(t, 10) // 20 samples
	for _, f := range []string{"class00/junk.jpg", "class01/junk.jpg"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("not an image at all"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Two bad files of 22 are 9.1%. Under Fail the error is a bad sample's own; under
	// Skip it says the limit was exceeded (one bad file alone never ends a run).
	const failed = `conveyor bench: pipeline: bad sample "class0`
	for _, tc := range []struct {
		flags   []string
		fail    string // how the error line starts, "" for a run that completes
		onError string // the effective config's policy and limit
		maxBad  string
	}{
		{nil, "conveyor bench: pipeline: 2 bad files in epoch 0 of 22 samples exceed MaxBadFraction 0.01; last: ", "", ""},
		{[]string{"--on-error", "fail", "--max-bad", "-1"}, failed, "", ""},
		{[]string{"--on-error", "skip", "--max-bad", "0"}, failed, "", ""},
		{[]string{"--max-bad", "0.09"}, "conveyor bench: pipeline: 2 bad files in epoch 0 of 22 samples exceed MaxBadFraction 0.09; last: ", "", ""},
		{[]string{"--max-bad", "0.1"}, "", "skip", "0.1"},
		{[]string{"--on-error", "skip", "--max-bad", "-1"}, "", "skip", "-1"},
	} {
		args := append([]string{"bench", dir, "--size", "16", "--batch", "7", "--workers", "1", "--json"}, tc.flags...)
		code, stdout, stderr := runCLI(t, args...)
		if tc.fail != "" {
			last := stderr[strings.LastIndex(strings.TrimSuffix(stderr, "\n"), "\n")+1:]
			if code != 1 || !strings.HasPrefix(last, tc.fail) {
				t.Errorf("%q: exit %d, last line %q; want exit 1 and an error starting %q", tc.flags, code, last, tc.fail)
			}
			continue
		}
		var res benchResult
		if err := json.Unmarshal([]byte(stdout), &res); code != 0 || err != nil {
			t.Errorf("%q: exit %d, %v\n%s", tc.flags, code, err, stderr)
			continue
		}
		if want := "on_error=" + tc.onError + " max_bad=" + tc.maxBad + " "; res.BadSamples != 2 || !strings.Contains(res.Config, want) {
			t.Errorf("%q: %d bad samples, config %q; want 2 and %q", tc.flags, res.BadSamples, res.Config, want)
		}
	}
}
