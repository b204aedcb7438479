package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/conveyor-ml/conveyor/source"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/pipeline"
)

func TestParsePartFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		env  map[string]string
		want cache.Part
		err  string
	}{
		{"", nil, cache.Part{}, ""},
		{"2/5", nil, cache.Part{Index: 2, Count: 5}, ""},
		{"env/4", map[string]string{"JOB_COMPLETION_INDEX": "3"}, cache.Part{Index: 3, Count: 4}, ""},
		// A full array 0-15.
		{"env", map[string]string{"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "15", "SLURM_ARRAY_TASK_COUNT": "16"}, cache.Part{Index: 7, Count: 16}, ""},
		{"env/16", map[string]string{"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "15", "SLURM_ARRAY_TASK_COUNT": "16"}, cache.Part{Index: 7, Count: 16}, ""},
		{"env", map[string]string{"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_COUNT": "2"}, cache.Part{Index: 1, Count: 2}, ""},
		// Task 7 rerun alone (sbatch --array=7): env/N converts part 7; bare env cannot know N.
		{"env/16", map[string]string{"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_MIN": "7", "SLURM_ARRAY_TASK_MAX": "7", "SLURM_ARRAY_TASK_COUNT": "1"}, cache.Part{Index: 7, Count: 16}, ""},
		{"env", map[string]string{"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_MIN": "7", "SLURM_ARRAY_TASK_MAX": "7", "SLURM_ARRAY_TASK_COUNT": "1"}, cache.Part{}, "runs tasks 7 to 7, 1 of them, not all the parts 0 to COUNT-1 (a rerun of some tasks?): give the number of parts as env/N"},
		// Tasks 3 and 5 rerun (--array=3,5): COUNT 2, MIN 3.
		{"env", map[string]string{"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "3", "SLURM_ARRAY_TASK_MAX": "5", "SLURM_ARRAY_TASK_COUNT": "2"}, cache.Part{}, "give the number of parts as env/N"},
		// An array 1-16 is not parts 0-15.
		{"env", map[string]string{"SLURM_ARRAY_TASK_ID": "16", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "16", "SLURM_ARRAY_TASK_COUNT": "16"}, cache.Part{}, "tasks 1 to 16"},
		{"env/16", map[string]string{"SLURM_ARRAY_TASK_ID": "16"}, cache.Part{}, "part 16/16"},
		{"env", map[string]string{"SLURM_ARRAY_TASK_ID": "7"}, cache.Part{}, "SLURM_ARRAY_TASK_COUNT is not set"},
		{"env", map[string]string{"JOB_COMPLETION_INDEX": "0"}, cache.Part{}, "SLURM_ARRAY_TASK_COUNT is not set"},
		{"env", nil, cache.Part{}, "neither $JOB_COMPLETION_INDEX"},
		{"env/4", map[string]string{"JOB_COMPLETION_INDEX": "four"}, cache.Part{}, `$JOB_COMPLETION_INDEX is "four"`},
		{"env/4", map[string]string{"JOB_COMPLETION_INDEX": "4"}, cache.Part{}, "part 4/4"},
		{"3/3", nil, cache.Part{}, "part 3/3"},
		{"x", nil, cache.Part{}, "want INDEX/COUNT"},
	} {
		got, err := parsePart(tc.in, func(k string) string { return tc.env[k] })
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("parsePart(%q, %v) = %v, %v; want %v", tc.in, tc.env, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("parsePart(%q, %v) error %v, want one containing %q", tc.in, tc.env, err, tc.err)
		}
	}
}

// A bad --part is a usage error of one line, naming the flag, and creates nothing.
func TestConvertPartUsage(t *testing.T) {
	t.Setenv("JOB_COMPLETION_INDEX", "")
	t.Setenv("SLURM_ARRAY_TASK_ID", "")
	src, _ := badTree(t)
	dst := filepath.Join(t.TempDir(), "dst")
	for _, part := range []string{"3/3", "x", "-1/2", "1/0", "env"} {
		code, _, stderr := runCLI(t, "convert", src, dst, "--part", part)
		first, _, _ := strings.Cut(stderr, "\n")
		if code != 2 || !strings.HasPrefix(first, "conveyor convert: --part: ") || strings.Count(stderr, "\n") != 2 {
			t.Errorf("--part %s: exit %d, stderr %q; want 2 and one line about --part, then where the usage is", part, code, stderr)
		}
	}
	if _, err := os.Stat(dst); err == nil {
		t.Errorf("a refused --part created %s", dst)
	}
}

// Three processes' worth of conveyor convert --part i/3 into one DST: verify and bench
// refuse it naming the missing part until the last one finishes, and then read what
// one conversion would have stored; a damaged shard is named with its part's prefix.
func TestConvertParts(t *testing.T) {
	src, _ := badTree(t)
	dst := filepath.Join(t.TempDir(), "dst")
	var wg sync.WaitGroup
	errs := make([]error, 3)
	outs := make([]string, 3)
	for _, i := range []int{0, 2} {
		wg.Go(func() {
			outs[i], _, errs[i] = runConvert(t, src, dst, "--size", "32", "--workers", "2", "--part", []string{"0/3", "", "2/3"}[i])
		})
	}
	wg.Wait()
	for _, i := range []int{0, 2} {
		if errs[i] != nil || !strings.Contains(outs[i], " part="+[]string{"0/3", "", "2/3"}[i]) {
			t.Fatalf("part %d/3: %v\n%s", i, errs[i], outs[i])
		}
	}
	var out bytes.Buffer
	err := verify([]string{dst}, &out, io.Discard)
	t.Logf("verify: %v\n%s", err, out.String())
	if err == nil || !strings.Contains(err.Error(), "part 1/3 has not run") || !strings.Contains(out.String(), "incomplete: ") {
		t.Fatalf("verify with part 1/3 missing: %v\n%s", err, out.String())
	}
	var res inspectResult
	out.Reset()
	if err := inspect([]string{"--json", dst}, &out, io.Discard); err != nil || json.Unmarshal(out.Bytes(), &res) != nil ||
		res.Parts != 3 || len(res.Unfinished) != 1 || res.Unfinished[0] != "1/3" || res.Complete {
		t.Fatalf("inspect --json with part 1/3 missing: %v\n%s", err, out.String())
	}
	if code, _, stderr := runCLI(t, "bench", dst, "--epochs", "1"); code != 1 || !strings.Contains(stderr, "--part 1/3") {
		t.Fatalf("bench with part 1/3 missing: exit %d\n%s", code, stderr)
	}

	rerun, _, err := runConvert(t, src, dst, "--size", "32", "--workers", "2", "--part", "0/3")
	if err != nil || !strings.Contains(rerun, "stored=0 ") {
		t.Fatalf("rerun of part 0/3: %v\n%s", err, rerun)
	}
	if _, _, err := runConvert(t, src, dst, "--size", "32", "--workers", "2", "--part", "1/3"); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := verify([]string{dst}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "records=24 ") {
		t.Fatalf("verify with every part: %v\n%s", err, out.String())
	}
	bad := 0
	for i := range 3 {
		b, err := os.ReadFile(filepath.Join(dst, partReportName(cache.Part{Index: i, Count: 3})))
		if err != nil {
			t.Fatal(err)
		}
		bad += strings.Count(string(b), "\n") - 1
	}
	if bad != 2 {
		t.Errorf("the parts' reports list %d bad files, want 2", bad)
	}
	out.Reset()
	if err := inspect([]string{dst}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "24 stored of 26 listed, 2 bad") || !strings.Contains(out.String(), "complete      true") ||
		!strings.Contains(out.String(), "parts         3, all complete") {
		t.Fatalf("inspect: %v\n%s", err, out.String())
	}

	shards, _ := filepath.Glob(filepath.Join(dst, "part-1-of-3-*.shard"))
	if len(shards) == 0 {
		t.Fatal("part 1/3 wrote no shard")
	}
	b, err := os.ReadFile(shards[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-5] ^= 0xff // a record's payload
	if err := os.WriteFile(shards[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = verify([]string{dst}, &out, io.Discard)
	if err == nil || !strings.Contains(out.String(), shards[0]) || !strings.Contains(out.String(), "(part 1/3)") || !strings.Contains(err.Error(), "(part 1/3)") {
		t.Fatalf("verify with a damaged record of part 1/3: %v\n%s", err, out.String())
	}
}

// partHelperEnv, when set to "SRC DST PART", makes TestHelperConvertPart a process that
// runs conveyor convert SRC DST --part PART and exits with its status.
const partHelperEnv = "CONVEYOR_CONVERT_PART_HELPER"

func TestHelperConvertPart(t *testing.T) {
	args := strings.Fields(os.Getenv(partHelperEnv))
	if len(args) != 3 {
		return // not a helper process
	}
	os.Exit(run([]string{"convert", args[0], args[1], "--size", "32", "--workers", "1", "--part", args[2]}, os.Stdout, os.Stderr))
}

// Three processes convert their parts of one tree into one DST at once; the result
// verifies, and a loader over it gives the batches a loader over a conversion in one
// process gives.
func TestConvertPartsProcesses(t *testing.T) {
	src, _ := badTree(t)
	dst := filepath.Join(t.TempDir(), "dst")
	const n = 3
	cmds := make([]*exec.Cmd, n)
	outs := make([]bytes.Buffer, n)
	for i := range n {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestHelperConvertPart$")
		cmds[i].Env = append(os.Environ(), partHelperEnv+"="+src+" "+dst+" "+strconv.Itoa(i)+"/"+strconv.Itoa(n))
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("part %d/%d: %v\n%s", i, n, err, outs[i].String())
		}
	}
	var out bytes.Buffer
	if err := verify([]string{dst}, &out, io.Discard); err != nil {
		t.Fatalf("verify: %v\n%s", err, out.String())
	}
	one := filepath.Join(t.TempDir(), "one")
	if o, stderr, err := runConvert(t, src, one, "--size", "32", "--workers", "2"); err != nil {
		t.Fatalf("convert: %v\n%s%s", err, o, stderr)
	}
	batches := func(dir string) []byte {
		conv, err := source.OpenConverted(dir, &source.ConvertedOptions{Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		defer conv.Close()
		cfg := &pipeline.Config{Batch: pipeline.BatchConfig{Size: 5}, Tuning: pipeline.TuningConfig{Workers: 2}, Order: pipeline.OrderConfig{Seed: 9}, Logf: t.Logf}
		if err := pipeline.ApplyRecipe(cfg, "train", 24); err != nil {
			t.Fatal(err)
		}
		ld, err := pipeline.New(conv, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer ld.Close()
		var all []byte
		for b, err := range ld.Epoch(context.Background(), 1) {
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, b.Data...)
			for k, i := range b.Indices {
				all = append(all, conv.Path(int(i))...)
				all = append(all, byte(b.Labels[k]))
			}
			b.Release()
		}
		return all
	}
	if a, b := batches(one), batches(dst); len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("batches from %d processes' parts differ from one conversion's (%d and %d bytes)", n, len(b), len(a))
	}
}
