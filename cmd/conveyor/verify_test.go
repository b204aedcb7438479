package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/conveyor-ml/conveyor/source"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/internal/synth"
)

// theShard returns the one shard of the converted dataset in dir and its index.
func theShard(t *testing.T, dir string) (shard, idx string) {
	t.Helper()
	shards, _ := filepath.Glob(filepath.Join(dir, "*.shard"))
	if len(shards) != 1 {
		t.Fatalf("shards %q, want one", shards)
	}
	return shards[0], strings.TrimSuffix(shards[0], ".shard") + ".idx"
}

func flipAt(t *testing.T, file string, off int64) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// Every kind of damage is a line of verify's output, naming the shard, and exit status 1;
// inspect lists what it can see without reading records.
func TestVerifyDamageKinds(t *testing.T) {
	for _, tc := range []struct {
		name, line string // line starts the line verify prints, before the shard's path
		inspect    bool   // inspect sees it too
		damage     func(t *testing.T, shard, idx string)
	}{
		{"record", "damaged ", false, func(t *testing.T, shard, _ string) {
			fi, _ := os.Stat(shard)
			flipAt(t, shard, fi.Size()/2)
		}},
		{"shard header", "damaged shard header ", true, func(t *testing.T, shard, _ string) { flipAt(t, shard, 20) }},
		{"index", "damaged index ", true, func(t *testing.T, _, idx string) {
			fi, _ := os.Stat(idx)
			flipAt(t, idx, fi.Size()/2)
		}},
		{"missing shard", "missing shard ", true, func(t *testing.T, shard, _ string) {
			if err := os.Remove(shard); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncated shard", "truncated shard ", true, func(t *testing.T, shard, _ string) {
			fi, _ := os.Stat(shard)
			if err := os.Truncate(shard, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, dst, _ := converted(t)
			shard, idx := theShard(t, dst)
			tc.damage(t, shard, idx)
			var out bytes.Buffer
			err := verify([]string{dst}, &out, io.Discard)
			t.Logf("verify:\n%s=> %v", out.String(), err)
			file := shard
			if tc.name == "index" {
				file = idx
			}
			if err == nil || !strings.HasPrefix(out.String(), tc.line+file) {
				t.Errorf("verify of a %s: %v\n%s; want a line %q first and an error", tc.name, err, out.String(), tc.line+file)
			}
			if code, _, stderr := runCLI(t, "verify", dst); code != 1 || !strings.Contains(stderr, "conveyor verify: ") {
				t.Errorf("exit status %d, stderr %q; want 1", code, stderr)
			}
			out.Reset()
			if err := inspect([]string{dst}, &out, io.Discard); err != nil {
				t.Fatal(err)
			}
			if saw := strings.Contains(out.String(), "integrity     1 problems") && strings.Contains(out.String(), tc.line+file); saw != tc.inspect {
				t.Errorf("inspect (sees it: %t):\n%s", tc.inspect, out.String())
			}
		})
	}
}

// A damaged shard header makes bench fail on bad samples naming the shard, instead of
// training on the other shards.
func TestBenchDamagedShard(t *testing.T) {
	_, dst, _ := converted(t)
	shard, _ := theShard(t, dst)
	flipAt(t, shard, 20)
	var out bytes.Buffer
	err := benchTo([]string{dst, "--epochs", "1", "--size", "16", "--batch", "4", "--workers", "2"}, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), filepath.Base(shard)) {
		t.Errorf("bench over a damaged shard header: %v, want an error naming %s\n%s", err, filepath.Base(shard), out.String())
	}
}

// A conversion that stopped (here: full) is refused by bench and failed by verify, saying
// so; bench --allow-incomplete trains on what it holds.
func TestIncompleteDataset(t *testing.T) {
	src, _ := badTree(t)
	dst := filepath.Join(t.TempDir(), "dst")
	if _, _, err := runConvert(t, src, dst, "--size", "32", "--max-bytes", "20k", "--workers", "1"); !errors.Is(err, cache.ErrFull) {
		t.Fatalf("convert: %v, want cache.ErrFull", err)
	}
	info, err := cache.ReadInfo(dst)
	if err != nil || info.Complete || !strings.Contains(info.Stopped, "full") || !info.Manifested() {
		t.Fatalf("dataset.json: %+v, %v", info, err)
	}
	args := []string{dst, "--epochs", "1", "--json", "--size", "16", "--batch", "4", "--workers", "2"}
	err = benchTo(args, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not known to be complete: its conversion stopped") || !strings.Contains(err.Error(), "--allow-incomplete") {
		t.Errorf("bench of an incomplete dataset: %v", err)
	}
	var out, stderr bytes.Buffer
	if err := benchTo(append(args, "--allow-incomplete"), &out, &stderr); err != nil {
		t.Fatal(err)
	}
	var res benchResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if res.Samples != info.Stored || res.Images != int64(info.Stored) || !strings.Contains(stderr.String(), "training on the") {
		t.Errorf("bench --allow-incomplete: %d samples, %d images; want %d\n%s", res.Samples, res.Images, info.Stored, stderr.String())
	}

	out.Reset()
	err = verify([]string{dst}, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "incomplete") || !strings.Contains(out.String(), "incomplete: its conversion stopped") {
		t.Errorf("verify of an incomplete dataset: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := inspect([]string{dst}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "complete      false: its conversion stopped") {
		t.Errorf("inspect (%v):\n%s", err, out.String())
	}
	if err := benchTo([]string{src, "--allow-incomplete"}, io.Discard, io.Discard); err == nil {
		t.Error("--allow-incomplete on an image folder: no error")
	}
}

// A convert into a directory another conversion holds exits at once, naming it, and
// writes nothing there.
func TestConvertLocked(t *testing.T) {
	src, _ := badTree(t)
	dst := filepath.Join(t.TempDir(), "dst")
	c, err := cache.Open(dst, &cache.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	release, err := c.LockConversion()
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := runConvert(t, src, dst, "--size", "32")
	if !errors.Is(err, cache.ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) || out != "" {
		t.Errorf("convert into a locked directory: %v\n%s", err, out)
	}
	for _, name := range []string{cache.InfoName, reportName} {
		if _, err := os.Stat(filepath.Join(dst, name)); err == nil {
			t.Errorf("a refused convert wrote %s", name)
		}
	}
	release()
	if _, _, err := runConvert(t, src, dst, "--size", "32"); err != nil {
		t.Errorf("convert once the lock is released: %v", err)
	}
}

// A conversion that fills its disk (a real, small file system) says so in dataset.json,
// and bench refuses the part it stored.
func TestConvertDiskFull(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root on Linux")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	src := t.TempDir()
	if _, err := synth.WriteTree(src, &synth.TreeOptions{Classes: 2, PerClass: 6, Seed: 5, MinSide: 200, MaxSide: 240}); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(mnt, "dst")
	_, _, err := runConvert(t, src, dst, "--size", "0", "--codec", "raw", "--workers", "1")
	if !errors.Is(err, syscall.ENOSPC) && !strings.Contains(fmt.Sprint(err), "no space left") {
		t.Fatalf("convert into a full disk: %v", err)
	}
	info, rerr := cache.ReadInfo(dst)
	if rerr != nil || info.Complete {
		t.Fatalf("dataset.json: %+v, %v", info, rerr)
	}
	t.Logf("stopped: %q", info.Stopped) // empty when the disk had no room left to say why
	err = benchTo([]string{dst, "--epochs", "1", "--size", "16", "--batch", "4"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not known to be complete") {
		t.Errorf("bench of a conversion stopped by a full disk: %v", err)
	}
	if err := verify([]string{dst}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Errorf("verify: %v", err)
	}
}

// A rerun of convert after a shard's header was damaged stores its samples again, and
// the dataset is whole; verify still names the damaged file, which nothing reads, until
// it is deleted.
func TestVerifyAfterRepair(t *testing.T) {
	src, dst, _ := converted(t)
	shard, idx := theShard(t, dst)
	flipAt(t, shard, 20)
	out, _, err := runConvert(t, src, dst, "--size", "32")
	if err != nil || !strings.Contains(out, "stored=24 ") {
		t.Fatalf("rerun: %v\n%s", err, out)
	}
	var bout bytes.Buffer
	if err := benchTo([]string{dst, "--epochs", "1", "--json", "--size", "16", "--batch", "4", "--workers", "2"}, &bout, io.Discard); err != nil {
		t.Fatalf("bench after the repair: %v", err)
	}
	var vout bytes.Buffer
	err = verify([]string{dst}, &vout, io.Discard)
	if err == nil || !strings.Contains(vout.String(), "damaged shard header "+shard) || !strings.Contains(vout.String(), "delete it") ||
		!strings.Contains(vout.String(), "lost_records=0 ") {
		t.Errorf("verify with the damaged shard left over: %v\n%s", err, vout.String())
	}
	for _, f := range []string{shard, idx} {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	vout.Reset()
	if err := verify([]string{dst}, &vout, io.Discard); err != nil {
		t.Errorf("verify once it is deleted: %v\n%s", err, vout.String())
	}
}

// A converted dataset whose shards are symbolic links (git-annex, DVC) is verified
// record by record and inspected as the dataset itself: verify passed it having read
// nothing (shards=0), and inspect called it complete with no records.
func TestVerifySymlinks(t *testing.T) {
	_, dst, _ := converted(t)
	farm := t.TempDir()
	ents, err := os.ReadDir(dst)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if n := e.Name(); n == cache.InfoName || strings.HasSuffix(n, ".shard") || strings.HasSuffix(n, ".idx") {
			if err := os.Symlink(filepath.Join(dst, n), filepath.Join(farm, n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var out bytes.Buffer
	if err := verify([]string{farm}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "shards=1 records=24 ") {
		t.Errorf("verify of links: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := inspect([]string{"--json", farm}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var res inspectResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Shards != 1 || res.Samples != 24 || !res.Complete || len(res.Problems) != 0 {
		t.Errorf("inspect of links: %v\n%s", err, out.String())
	}
}

// A dataset.json counting more samples than its intact shards hold fails verify, which
// opening would refuse, saying so.
func TestVerifyCountsSamples(t *testing.T) {
	_, dst, _ := converted(t)
	info, err := cache.ReadInfo(dst)
	if err != nil {
		t.Fatal(err)
	}
	info.Stored += 3
	if err := cache.WriteInfo(dst, info); err != nil {
		t.Fatal(err)
	}
	err = verify([]string{dst}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "3 of the 27 samples dataset.json counts are in none of its shards in "+dst) || strings.HasSuffix(err.Error(), ": ") {
		t.Errorf("verify: %v", err)
	}
}

// A shard index far larger than its shard could have (damaged, or not conveyor's) is
// reported by verify naming it, and neither verify nor opening the dataset reads it into
// memory whole: index files were read whole, whatever their size.
func TestVerifyHugeIndex(t *testing.T) {
	_, dst, _ := converted(t)
	_, idx := theShard(t, dst)
	const huge = 512 << 20
	if err := os.Truncate(idx, huge); err != nil { // sparse: costs no disk
		t.Fatal(err)
	}
	allocated := func(f func()) uint64 {
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		f()
		runtime.ReadMemStats(&b)
		return b.TotalAlloc - a.TotalAlloc
	}
	var out bytes.Buffer
	var err error
	n := allocated(func() { err = verify([]string{dst}, &out, io.Discard) })
	if err == nil || !strings.Contains(out.String(), "damaged index "+idx) {
		t.Errorf("verify with an index of %d bytes: %v\n%s", huge, err, out.String())
	}
	if n > huge/4 {
		t.Errorf("verify allocated %d bytes with an index of %d", n, huge)
	}
	n = allocated(func() {
		if d, err := source.Open(context.Background(), dst, &source.OpenOptions{Converted: &source.ConvertedOptions{AllowIncomplete: true, Logf: func(string, ...any) {}}}); err == nil {
			d.Close()
		}
	})
	if n > huge/4 {
		t.Errorf("opening the dataset allocated %d bytes with an index of %d", n, huge)
	}
}
