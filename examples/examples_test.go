// Package examples runs every example program the way its documentation says, on the
// small data set it generates (examples/toy), so an example that no longer builds, or
// fails on its own data, fails the tests.
package examples

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// build compiles the example in dir into a temporary binary.
func build(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(dir))
	out, err := exec.Command("go", "build", "-o", bin, "./"+dir).CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./examples/%s: %v\n%s", dir, err, out)
	}
	return bin
}

func TestExamplesRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs every example; skipped with -short")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build the examples with")
	}
	shards := t.TempDir()
	for _, c := range []struct {
		dir  string
		args []string
		want string // in the output
	}{
		{"quickstart", []string{"-epochs", "1"}, "step: "},
		{"eval", []string{"-epochs", "1"}, ""},
		{"train", []string{"-epochs", "1"}, ""},
		{"train", []string{"-epochs", "1", "-recipe", "randaugment", "-mixup", "0.2", "-cutmix", "1"}, ""},
		{"customop", nil, ""},
		{"wdsshards", []string{"-dst", shards, "-per", "16"}, "ShardSamples"},
	} {
		t.Run(c.dir+strings.Join(c.args, ""), func(t *testing.T) {
			bin := build(t, c.dir)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, c.args...)
			cmd.Dir = t.TempDir()
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), c.want) {
				t.Fatalf("%s %q: %v\n%s", c.dir, c.args, err, out)
			}
			t.Logf("%s", out)
		})
	}
	ents, err := os.ReadDir(shards)
	if err != nil || len(ents) == 0 {
		t.Fatalf("wdsshards wrote nothing into %s: %v", shards, err)
	}
}
