package convertparts

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v2"
)

// The Slurm script is valid bash, and run as array task 7 of 0-15 it execs conveyor
// convert SRC DST with --part env/16, which reads that task's part from Slurm's
// variables; rerun alone (sbatch --array=7) it gives the same --part.
func TestSlurmArray(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash:", err)
	}
	if out, err := exec.Command(bash, "-n", "slurm-array.sh").CombinedOutput(); err != nil {
		t.Fatalf("bash -n slurm-array.sh: %v\n%s", err, out)
	}
	dir := t.TempDir()
	args := filepath.Join(dir, "args")
	fake := filepath.Join(dir, "conveyor")
	if err := os.WriteFile(fake, []byte("#!/bin/bash\nprintf '%s\\n' \"$@\" > \""+args+"\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bash, "slurm-array.sh")
	cmd.Env = append(os.Environ(), "CONVEYOR="+fake, "SRC=/src", "DST=/dst",
		"SLURM_ARRAY_TASK_ID=7", "SLURM_ARRAY_TASK_MIN=0", "SLURM_ARRAY_TASK_COUNT=16", "SLURM_CPUS_PER_TASK=4")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("slurm-array.sh: %v\n%s", err, out)
	}
	b, err := os.ReadFile(args)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(string(b))
	if want := []string{"convert", "/src", "/dst", "--size", "256", "--workers", "4", "--part", "env/16"}; !slices.Equal(got, want) {
		t.Fatalf("slurm-array.sh ran conveyor %q, want %q", got, want)
	}
	if out, err := exec.Command(bash, "slurm-array.sh").CombinedOutput(); err == nil || !strings.Contains(string(out), "SRC") {
		t.Fatalf("slurm-array.sh without SRC: %v, %s; want it to stop naming SRC", err, out)
	}
}

// The Indexed Job parses, and its --part names as many parts as it has completions.
func TestIndexedJob(t *testing.T) {
	b, err := os.ReadFile("k8s-indexed-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var job struct {
		Kind string `yaml:"kind"`
		Spec struct {
			CompletionMode string `yaml:"completionMode"`
			Completions    int    `yaml:"completions"`
			Template       struct {
				Spec struct {
					Containers []struct {
						Command []string `yaml:"command"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &job); err != nil {
		t.Fatal(err)
	}
	if job.Kind != "Job" || job.Spec.CompletionMode != "Indexed" || len(job.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("kind %q, completionMode %q, %d containers; want an Indexed Job of one container", job.Kind, job.Spec.CompletionMode, len(job.Spec.Template.Spec.Containers))
	}
	cmd := job.Spec.Template.Spec.Containers[0].Command
	want := "--part=env/" + strconv.Itoa(job.Spec.Completions)
	if len(cmd) < 4 || cmd[0] != "conveyor" || cmd[1] != "convert" || !slices.Contains(cmd, want) {
		t.Fatalf("command %q: want conveyor convert SRC DST ... %s", cmd, want)
	}
}
