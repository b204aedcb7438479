package convertparts

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/internal/synth"
)

// TestSlurmArrayJob submits slurm-array.sh to the Slurm cluster sbatch reaches (CI
// starts a single-node one with .ci/slurm.sh) as its comment tells a user to: a 4-task
// array converts a small tree while a verify job waits on it with afterany. One task
// hangs on its first run and is cancelled, so verify fails naming its part; a rerun of
// that task alone (--array=2, PARTS=4) completes the dataset, which then verifies with
// every image. About 40 s, most of it sbatch --wait polling.
func TestSlurmArrayJob(t *testing.T) {
	if _, err := exec.LookPath("sbatch"); err != nil {
		t.Skip("no sbatch, so no Slurm to run slurm-array.sh on (.ci/slurm.sh starts one as root):", err)
	}
	if out, err := exec.Command("sinfo", "-h", "-o", "%T").CombinedOutput(); err != nil {
		t.Skipf("sbatch is installed but no Slurm controller answers (.ci/slurm.sh start DIR; SLURM_CONF=DIR/slurm.conf): sinfo: %v: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	script, err := filepath.Abs("slurm-array.sh")
	if err != nil {
		t.Fatal(err)
	}
	conveyor := filepath.Join(dir, "conveyor")
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if out, err := exec.CommandContext(ctx, goCmd, "build", "-o", conveyor, "github.com/conveyor-ml/conveyor/cmd/conveyor").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	files, err := synth.WriteTree(src, &synth.TreeOptions{Classes: 4, PerClass: 10, MaxSide: 128})
	if err != nil {
		t.Fatal(err)
	}
	// Task 2's first run hangs, as on a stuck node, until it is cancelled; it writes
	// its name for scancel, JOBID_2.
	mark := filepath.Join(dir, "task2-hung")
	hang := filepath.Join(dir, "conveyor-hang-once")
	if err := os.WriteFile(hang, []byte(`#!/bin/bash
if [ "$SLURM_ARRAY_TASK_ID" = 2 ] && mkdir "`+mark+`" 2>/dev/null; then
	echo "${SLURM_ARRAY_JOB_ID}_$SLURM_ARRAY_TASK_ID" > "`+mark+`/id.tmp" && mv "`+mark+`/id.tmp" "`+mark+`/id"
	exec sleep 600
fi
exec "`+conveyor+`" "$@"
`), 0o755); err != nil {
		t.Fatal(err)
	}
	export := "--export=ALL,SRC=" + src + ",DST=" + dst + ",CONVEYOR=" + hang
	// The #SBATCH lines ask for 16 CPUs and 16G; a user's flags override them.
	small := []string{"--cpus-per-task=1", "--mem=500M", "--time=5"}
	sbatch := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "sbatch", args...)
		cmd.Dir = dir // where the tasks' logs go
		return cmd
	}
	logs := func() string {
		var b strings.Builder
		names, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		for _, n := range names {
			data, _ := os.ReadFile(n)
			b.WriteString("== " + filepath.Base(n) + "\n" + string(data))
		}
		return b.String()
	}

	array := sbatch(append(append([]string{"--wait", "--parsable", "--array=0-3", export}, small...), script, "--size", "64")...)
	stdout, err := array.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var arrayErr strings.Builder
	array.Stderr = &arrayErr
	if err := array.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		array.Wait()
		t.Fatalf("sbatch --array=0-3: %v: %s", err, arrayErr.String())
	}
	jobID, _, _ := strings.Cut(strings.TrimSpace(line), ";")
	t.Cleanup(func() { exec.Command("scancel", jobID).Run() })
	verify := sbatch("--wait", "--dependency=afterany:"+jobID, "--output=verify-1.log", "--mem=500M", "--wrap", conveyor+" verify "+dst)
	var verifyOut strings.Builder
	verify.Stdout, verify.Stderr = &verifyOut, &verifyOut
	if err := verify.Start(); err != nil {
		t.Fatal(err)
	}

	var hung []byte
	for ctx.Err() == nil {
		if hung, err = os.ReadFile(filepath.Join(mark, "id")); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if hung == nil {
		t.Fatalf("task 2 never started: %v\n%s", ctx.Err(), logs())
	}
	if out, err := exec.CommandContext(ctx, "scancel", strings.TrimSpace(string(hung))).CombinedOutput(); err != nil {
		t.Fatalf("scancel task 2: %v: %s", err, out)
	}
	if err := array.Wait(); err == nil {
		t.Fatalf("sbatch --wait --array=0-3 succeeded with task 2 cancelled\n%s", logs())
	}
	if err := verify.Wait(); err == nil {
		t.Fatalf("verify after a cancelled task passed: %s\n%s", verifyOut.String(), logs())
	}
	v, err := os.ReadFile(filepath.Join(dir, "verify-1.log"))
	if err != nil || !strings.Contains(string(v), "part 2/4") && !strings.Contains(string(v), "part-2-of-4") {
		t.Fatalf("verify after a cancelled task does not name part 2: %v\n%s", err, logs())
	}
	t.Logf("verify after task 2 was cancelled:\n%s", v)

	// The rerun of task 2 alone names the number of parts, and hangs no more.
	if out, err := sbatch(append(append([]string{"--wait", "--array=2", export + ",PARTS=4"}, small...), script, "--size", "64")...).CombinedOutput(); err != nil {
		t.Fatalf("sbatch --array=2: %v: %s\n%s", err, out, logs())
	}
	out, err := exec.CommandContext(ctx, conveyor, "verify", dst).CombinedOutput()
	if err != nil {
		t.Fatalf("conveyor verify after the rerun: %v\n%s\n%s", err, out, logs())
	}
	if want := " records=" + strconv.Itoa(len(files)) + " "; !strings.Contains(string(out), want) {
		t.Fatalf("conveyor verify: %s; want%s", out, want)
	}
}
