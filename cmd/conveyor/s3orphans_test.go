package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/source"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/internal/s3test"
	"github.com/conveyor-ml/conveyor/objstore"
)

// The advice "run again with --delete-orphans" can be followed from any staging
// directory: a rerun over a complete conversion deletes the orphans (it said "nothing
// to do" and deleted none), whole and for a part, and the dataset still reads the same.
func TestConvertS3DeleteOrphansWhenComplete(t *testing.T) {
	s3test.Each(t, testConvertS3DeleteOrphansWhenComplete)
}

func testConvertS3DeleteOrphansWhenComplete(t *testing.T, srv *s3test.Server) {
	srv.Env(t, "")
	t.Setenv("TMPDIR", t.TempDir())
	src, _ := badTree(t)
	flags := []string{"--size", "32", "--workers", "2"}
	for _, c := range []struct{ prefix, part, orphan string }{
		{"whole/", "", "00000000000000ff-00000000"},
		{"parted/", "0/2", "part-0-of-2-00000000000000ff-00000000"},
	} {
		url := srv.URL(c.prefix)
		args := append([]string{src, url}, flags...)
		if c.part != "" {
			args = append(args, "--part", c.part)
		}
		if out, stderr, err := runConvert(t, args...); err != nil {
			t.Fatalf("convert: %v\n%s%s", err, out, stderr)
		}
		var want []byte
		if c.part == "" { // one part of two does not open
			want, _, _ = s3Epoch(t, url, &source.OpenOptions{Store: fastS3})
		}
		srv.Put(t, c.prefix+c.orphan+".shard", []byte("left by a lost run"))
		srv.Put(t, c.prefix+c.orphan+".idx", []byte("left by a lost run"))
		// The staging directory is gone (the default one is removed once uploaded).
		out, stderr, err := runConvert(t, args...)
		if err != nil || !strings.Contains(out, "nothing to convert") || !strings.Contains(stderr, "--delete-orphans") || !strings.Contains(stderr, c.orphan) {
			t.Fatalf("rerun over a complete conversion with orphans: %v, want them reported\n%s%s", err, out, stderr)
		}
		out, stderr, err = runConvert(t, append(args, "--delete-orphans")...)
		if err != nil || !strings.Contains(out, "deleted=2 ") {
			t.Fatalf("rerun --delete-orphans over a complete conversion: %v, want deleted=2\n%s%s", err, out, stderr)
		}
		b, err := objstore.OpenBucket(context.Background(), url, fastS3)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		names := shardFiles(t, b)
		if slices.Contains(names, c.orphan+".shard") || len(names) == 0 {
			t.Fatalf("after --delete-orphans: %v", names)
		}
		if want != nil {
			if got, _, _ := s3Epoch(t, url, &source.OpenOptions{Store: fastS3}); !bytes.Equal(got, want) {
				t.Fatal("after deleting the orphans, other batches")
			}
		}
		if leases := leaseObjects(t, b); len(leases) != 0 {
			t.Errorf("leases left behind: %v", leases)
		}
	}
}

// A run of a part that finds another run of the same part live (its lease renewed
// recently, from another host) leaves the other run's files alone, though they are in
// neither its staging directory nor the part's record; once that lease is a killed
// process's (this host, a pid that has exited), they are orphans. Each of two runs from
// different staging directories called the other's live files orphans.
func TestConvertS3OrphansOfLiveRun(t *testing.T) { s3test.Each(t, testConvertS3OrphansOfLiveRun) }

func testConvertS3OrphansOfLiveRun(t *testing.T, srv *s3test.Server) {
	srv.Env(t, "")
	t.Setenv("TMPDIR", t.TempDir())
	src, _ := badTree(t)
	url := srv.URL("live/")
	args := []string{src, url, "--size", "32", "--workers", "2", "--part", "0/2", "--staging", t.TempDir(), "--delete-orphans"}
	if out, stderr, err := runConvert(t, args...); err != nil {
		t.Fatalf("convert: %v\n%s%s", err, out, stderr)
	}
	// Another run of part 0/2, from elsewhere, has uploaded a shard and not yet its record.
	theirs := "part-0-of-2-00000000000000aa-00000000.shard"
	srv.Put(t, "live/"+theirs, []byte("being written by another run"))
	lease := "live/convert.part-0-of-2.00000000000000aa.lease"
	body, _ := json.Marshal(map[string]any{"host": "another-node", "pid": 1, "staging": "/scratch/other"})
	srv.Put(t, lease, body)
	out, stderr, err := runConvert(t, args...)
	if err != nil || strings.Contains(out, "deleted=") || !strings.Contains(stderr, "another run converts part 0/2") || !strings.Contains(stderr, "another-node") {
		t.Fatalf("with another run live: %v, want its files left and it named\n%s%s", err, out, stderr)
	}
	b, err := objstore.OpenBucket(context.Background(), url, fastS3)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !slices.Contains(shardFiles(t, b), theirs) {
		t.Fatalf("the live run's %s was deleted", theirs)
	}
	// That run was killed: its lease names this host, its boot and PID namespace, and an
	// exited process.
	host, _ := os.Hostname()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip("no true(1):", err)
	}
	body, _ = json.Marshal(map[string]any{"host": host, "pid": dead.Process.Pid, "staging": "/tmp/lost", "started": time.Now(), "boot": bootID(t), "pidns": pidNamespace(t)})
	srv.Put(t, lease, body)
	out, stderr, err = runConvert(t, args...)
	if err != nil || !strings.Contains(out, "deleted=1 ") {
		t.Fatalf("with a killed run's lease: %v, want its shard deleted\n%s%s", err, out, stderr)
	}
	if slices.Contains(shardFiles(t, b), theirs) {
		t.Fatalf("the killed run's %s is still there", theirs)
	}
	if leases := leaseObjects(t, b); len(leases) != 0 {
		t.Errorf("leases left behind: %v", leases)
	}
}

// leaseObjects lists the conversion leases under b.
func leaseObjects(t *testing.T, b *objstore.Bucket) []string {
	t.Helper()
	objs, err := b.List(context.Background(), "convert.")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		if strings.HasSuffix(o.Name, ".lease") {
			names = append(names, o.Name)
		}
	}
	return names
}

// A shard (and its index) present but unused — a lost run's, which dataset.json does
// not list — is an orphan to verify, named as such with exit 0, locally and in S3
// alike. S3 verify failed for it ("missing shard … delete it") while local passed; then
// S3 verify fetched only what the manifest names and said nothing of it.
func TestVerifyOrphans(t *testing.T) { s3test.Each(t, testVerifyOrphans) }

func testVerifyOrphans(t *testing.T, srv *s3test.Server) {
	srv.Env(t, "")
	t.Setenv("TMPDIR", t.TempDir())
	src, _ := badTree(t)
	flags := []string{"--size", "32", "--workers", "2"}
	local, lost := filepath.Join(t.TempDir(), "local"), filepath.Join(t.TempDir(), "lost")
	for _, dst := range []string{local, lost} {
		if out, stderr, err := runConvert(t, append([]string{src, dst}, flags...)...); err != nil {
			t.Fatalf("convert: %v\n%s%s", err, out, stderr)
		}
	}
	url := srv.URL("orphans/")
	if out, stderr, err := runConvert(t, append([]string{src, url}, flags...)...); err != nil {
		t.Fatalf("convert: %v\n%s%s", err, out, stderr)
	}
	files, _ := filepath.Glob(filepath.Join(lost, "*.shard"))
	idx, _ := filepath.Glob(filepath.Join(lost, "*.idx"))
	files = append(files, idx...)
	if len(files) != 2 {
		t.Fatalf("the lost run wrote %v", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(local, filepath.Base(f)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		srv.Put(t, "orphans/"+filepath.Base(f), data)
	}
	for _, c := range []struct{ dir, where string }{{local, local + "/"}, {url, url}} {
		var out bytes.Buffer
		err := verify([]string{c.dir}, &out, io.Discard)
		if err != nil || !strings.Contains(out.String(), "orphans=2\n") || !strings.Contains(out.String(), "orphan "+c.where+filepath.Base(files[0])+": ") {
			t.Errorf("verify %s with a lost run's shard: %v, want it named an orphan and exit 0\n%s", c.dir, err, out.String())
		}
	}
}

// bootID and pidNamespace are what a lease written on this host records (Linux).
func bootID(t *testing.T) string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Skip("no boot ID here: a killed run's lease is stale only by its age")
	}
	return strings.TrimSpace(string(b))
}

func pidNamespace(t *testing.T) string {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Skip("no PID namespace here: a killed run's lease is stale only by its age")
	}
	return ns
}

// TestOrphanAdvice: verify's advice for an orphan of a dataset converted in parts names
// the part whose convert deletes it, so it can be followed as printed.
func TestOrphanAdvice(t *testing.T) {
	p := cache.Part{Index: 1, Count: 4}
	url := "s3://bucket/ds/"
	got := orphanAdvice(url, url+p.ShardPrefix()+"00000000000000ff-00000000.shard")
	if !strings.Contains(got, "conveyor convert SRC "+url+" --part 1/4 --delete-orphans") {
		t.Errorf("advice for a part's orphan: %q", got)
	}
	if got := orphanAdvice(url, url+"00000000000000ff-00000000.shard"); strings.Contains(got, "--part") || !strings.Contains(got, "--delete-orphans") {
		t.Errorf("advice for a whole conversion's orphan: %q", got)
	}
	if got := orphanAdvice("/data/ds", "/data/ds/x.shard"); got != "" {
		t.Errorf("advice for a local orphan: %q", got)
	}
}
