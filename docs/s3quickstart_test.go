package docs

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/internal/s3test"
)

// TestS3QuickStart runs object-storage.md's quick start as written — versitygw, a bucket
// made with curl, conveyor convert into it, conveyor bench from it — with only the port,
// the directory and the server's path changed, so the page cannot drift from what works.
// It takes about a minute on two cores.
func TestS3QuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs conveyor bench and convert on 1000 images; skipped with -short")
	}
	bin := s3test.Versitygw.Binary()
	if bin == "" {
		t.Skipf("versitygw not found; install it with: %s", s3test.Install)
	}
	if out, err := exec.Command("curl", "--help", "all").Output(); err != nil || !strings.Contains(string(out), "--aws-sigv4") {
		t.Skip("curl with --aws-sigv4 (7.75 or later) not found")
	}
	md, err := os.ReadFile("object-storage.md")
	if err != nil {
		t.Fatal(err)
	}
	script := quickStart(t, string(md))

	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "conveyor"), "../cmd/conveyor")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	for _, r := range []struct{ old, new string }{
		{"127.0.0.1:7070", addr},
		{"/tmp/conveyor-s3", filepath.Join(dir, "s3")},
		{`"$(go env GOPATH)/bin/versitygw"`, `"` + bin + `"`},
		{"go install github.com/versity/versitygw/cmd/versitygw@v1.8.0\n", ""},
	} {
		if !strings.Contains(script, r.old) {
			t.Fatalf("the quick start no longer holds %q; update this test with the page", r.old)
		}
		script = strings.ReplaceAll(script, r.old, r.new)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// set -e stops at the first failing step; the trap stops the server however it ends.
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n"+script)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+dir, "TMPDIR="+dir, "XDG_CACHE_HOME="+filepath.Join(dir, "cache"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the quick start failed: %v\n%s", err, out)
	}
	for _, want := range []string{"conveyor convert uploaded=", "conveyor total images=2000", "object store"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the quick start's output lacks %q:\n%s", want, out)
		}
	}
}

// quickStart returns the first sh block after the quick start's heading.
func quickStart(t *testing.T, md string) string {
	t.Helper()
	_, after, ok := strings.Cut(md, "\n## Quick start: a local S3 server\n")
	if !ok {
		t.Fatal("object-storage.md has no heading \"Quick start: a local S3 server\"")
	}
	for _, b := range blocks(after) {
		if b.lang == "sh" {
			return b.text
		}
	}
	t.Fatal("no sh block in the quick start")
	return ""
}
