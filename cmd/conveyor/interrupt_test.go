//go:build unix

package main

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// commandHelperEnv, when set to a command line (its words separated by newlines), makes
// TestHelperCommand a process that runs it and exits with its status.
const commandHelperEnv = "CONVEYOR_COMMAND_HELPER"

func TestHelperCommand(t *testing.T) {
	line := os.Getenv(commandHelperEnv)
	if line == "" {
		return // not a helper process
	}
	os.Exit(run(strings.Split(line, "\n"), os.Stdout, os.Stderr))
}

// Every command that waits for a store stops at Ctrl-C (SIGINT) within 2 s, saying it
// was interrupted and naming what it waited for, however long the store's own timeouts:
// here a server that never answers shards (or anything), which only the 60 s
// AttemptTimeout would give up on. The first request the server leaves unanswered says
// the command is waiting for it.
func TestInterrupt(t *testing.T) {
	dir := t.TempDir()
	index := filepath.Join(dir, "train.json")
	os.WriteFile(index, []byte(`{"__kind__": "wids-shard-index-v1", "wids_version": 1, "class_names": ["a", "b"],
"shardlist": [{"url": "train-00.tar", "nsamples": 4}, {"url": "train-01.tar", "nsamples": 4}]}`), 0o644)
	tree := smallTree(t, 2)
	_, conv, _ := converted(t)
	for _, tc := range []struct {
		name  string
		args  []string // URL stands for the server's
		files string   // a directory the server serves, but for shards (.shard, .tar)
	}{
		{"bench index", []string{"bench", "URL/train-{00..01}.tar"}, ""}, // every shard indexed while opening
		{"bench read", []string{"bench", "URL/train-{00..01}.tar", "--shard-index", index, "--epochs", "1"}, ""},
		{"inspect shards", []string{"inspect", "URL/train-{00..01}.tar"}, ""},
		{"inspect converted", []string{"inspect", "URL/converted/"}, ""},
		{"verify shards", []string{"verify", "URL/train-{00..01}.tar"}, ""},
		{"verify converted", []string{"verify", "URL/converted/"}, ""},
		{"verify read", []string{"verify", "URL/train.json"}, dir},    // indexed as its samples are read
		{"verify converted shards", []string{"verify", "URL/"}, conv}, // its shards, after its indexes
		{"convert", []string{"convert", tree, "s3://bkt/out/"}, ""},   // looking for an earlier conversion
	} {
		t.Run(tc.name, func(t *testing.T) {
			waiting := make(chan string, 1)
			release := make(chan struct{})
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.files != "" && !strings.HasSuffix(r.URL.Path, ".shard") && !strings.HasSuffix(r.URL.Path, ".tar") {
					http.FileServer(http.Dir(tc.files)).ServeHTTP(w, r)
					return
				}
				select {
				case waiting <- r.Method + " " + r.URL.Path:
				default:
				}
				select {
				case <-r.Context().Done():
				case <-release:
				}
			}))
			defer hs.Close()
			defer close(release) // before Close, which waits for the handlers
			var args []string
			for _, a := range tc.args {
				args = append(args, strings.Replace(a, "URL", hs.URL, 1))
			}
			// Started with SIGINT ignored, as a shell starts a background job ("conveyor
			// bench ... &"): only a handler of conveyor's own makes Ctrl-C stop it.
			cmd := exec.Command("/bin/sh", "-c", `trap "" INT; exec "$0" "$@"`, os.Args[0], "-test.run=^TestHelperCommand$")
			cmd.Env = append(os.Environ(), commandHelperEnv+"="+strings.Join(args, "\n"), "TMPDIR="+t.TempDir(),
				"AWS_ENDPOINT_URL="+hs.URL, "AWS_ACCESS_KEY_ID=key", "AWS_SECRET_ACCESS_KEY=secret", "AWS_REGION=us-east-1",
				"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE="+filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "none"))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case req := <-waiting:
				t.Logf("waiting for %s", req)
			case err := <-exited:
				t.Fatalf("ended before it reached the server: %v\n%s%s", err, &stdout, &stderr)
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-exited
				t.Fatalf("no request in 30 s\n%s%s", &stdout, &stderr)
			}
			sent := time.Now()
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			var err error
			select {
			case err = <-exited:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				<-exited
				t.Fatalf("still running 20 s after SIGINT\n%s%s", &stdout, &stderr)
			}
			took := time.Since(sent)
			msg := strings.TrimSpace(stderr.String())
			last := msg[strings.LastIndex(msg, "\n")+1:]
			t.Logf("exited %v after SIGINT: %v: %s", took.Round(time.Millisecond), err, last)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Errorf("%v after SIGINT, want exit status 1", err)
			}
			if !strings.HasPrefix(last, "conveyor "+args[0]+": interrupted (interrupt signal received): ") ||
				!strings.Contains(last, hs.URL) && !strings.Contains(last, "s3://bkt/out/") {
				t.Errorf("last line of stderr %q, want the command saying it was interrupted, naming the URL", last)
			}
			if took > 2*time.Second {
				t.Errorf("exited %v after SIGINT, want 2 s at most", took)
			}
		})
	}
}
