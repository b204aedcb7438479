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

// The Slurm script is valid bash and, run as an array task, execs conveyor convert SRC
// DST --part env/N with N the array's size, or PARTS for a rerun of some tasks, refusing
// an array and PARTS that disagree; the script's arguments follow, and an s3:// DST gets
// a staging directory that outlives the job unless the arguments name one.
func TestSlurmArray(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash:", err)
	}
	if out, err := exec.Command(bash, "-n", "slurm-array.sh").CombinedOutput(); err != nil {
		t.Fatalf("bash -n slurm-array.sh: %v\n%s", err, out)
	}
	dir := t.TempDir()
	argsFile := filepath.Join(dir, "args")
	fake := filepath.Join(dir, "conveyor")
	if err := os.WriteFile(fake, []byte("#!/bin/bash\nprintf '%s\\n' \"$@\" > \""+argsFile+"\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// task is SLURM_ARRAY_TASK_ID, _MIN, _MAX and _COUNT.
	task := func(id, lo, hi, n int) []string {
		return []string{"SLURM_ARRAY_TASK_ID=" + strconv.Itoa(id), "SLURM_ARRAY_TASK_MIN=" + strconv.Itoa(lo),
			"SLURM_ARRAY_TASK_MAX=" + strconv.Itoa(hi), "SLURM_ARRAY_TASK_COUNT=" + strconv.Itoa(n)}
	}
	conv := func(dst string, rest ...string) []string {
		return append([]string{"convert", "/src", dst, "--size", "256", "--workers", "4"}, rest...)
	}
	for _, tc := range []struct {
		name    string
		env     []string
		args    []string
		want    []string // conveyor's arguments, or nil when the script must refuse
		wantErr string   // in the refusal
	}{
		{"full array", task(7, 0, 15, 16), nil, conv("/dst", "--part", "env/16"), ""},
		{"smaller array", task(3, 0, 3, 4), nil, conv("/dst", "--part", "env/4"), ""},
		{"arguments", task(3, 0, 3, 4), []string{"--codec", "jpeg", "--workers", "2"},
			conv("/dst", "--part", "env/4", "--codec", "jpeg", "--workers", "2"), ""},
		{"rerun", append(task(7, 7, 7, 1), "PARTS=16"), nil, conv("/dst", "--part", "env/16"), ""},
		{"rerun without PARTS", task(7, 7, 7, 1), nil, nil, "PARTS=N"},
		{"array beyond PARTS", append(task(3, 0, 3, 4), "PARTS=3"), nil, nil, "PARTS=3"},
		{"not an array", nil, nil, nil, "SLURM_ARRAY_TASK_ID"},
		{"s3", append(task(2, 0, 3, 4), "DST=s3://b/p/", "SLURM_SUBMIT_DIR=/home/u"), nil,
			conv("s3://b/p/", "--part", "env/4", "--staging", "/home/u/conveyor-staging/b_p/part-2-of-4"), ""},
		{"s3 STAGING", append(task(2, 0, 3, 4), "DST=s3://b/p", "STAGING=/scratch/s"), nil,
			conv("s3://b/p", "--part", "env/4", "--staging", "/scratch/s/part-2-of-4"), ""},
		{"s3 --staging", append(task(2, 0, 3, 4), "DST=s3://b/p"), []string{"--staging=/x"},
			conv("s3://b/p", "--part", "env/4", "--staging=/x"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(argsFile)
			cmd := exec.Command(bash, append([]string{"slurm-array.sh"}, tc.args...)...)
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "CONVEYOR=" + fake, "SRC=/src", "DST=/dst", "SLURM_CPUS_PER_TASK=4"}, tc.env...)
			out, err := cmd.CombinedOutput()
			if tc.want == nil {
				if err == nil || !strings.Contains(string(out), tc.wantErr) {
					t.Fatalf("slurm-array.sh: %v, %s; want it to stop naming %s", err, out, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("slurm-array.sh: %v\n%s", err, out)
			}
			b, err := os.ReadFile(argsFile)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"); !slices.Equal(got, tc.want) {
				t.Fatalf("slurm-array.sh ran conveyor %q, want %q", got, tc.want)
			}
		})
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
