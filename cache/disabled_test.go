package cache

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

// failWritesAfter makes writeAt fail with ENOSPC after n successful writes, for the rest
// of the test, and returns the count of calls.
func failWritesAfter(t *testing.T, n int64) *atomic.Int64 {
	var calls atomic.Int64
	orig := writeAt
	writeAt = func(f *os.File, b []byte, off int64) (int, error) {
		if calls.Add(1) > n {
			return 0, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
		}
		return orig(f, b, off)
	}
	t.Cleanup(func() { writeAt = orig })
	return &calls
}

// TestDiskFull fails the nth write (a shard header, a record or an index entry): that
// Put and every later one return ErrDisabled, it is logged once, and every record stored
// before stays readable.
func TestDiskFull(t *testing.T) {
	// 100×100 raw records of 30 KB, two to a 64 KiB shard, so the writes are: the first
	// shard's header, record 0, its index entry, record 1, its index entry, the second
	// shard's header, record 2, ...
	const w = 100
	for _, tc := range []struct {
		name      string
		ok        int64 // writes that succeed
		stored    int   // Puts that succeed
		lastWhole bool  // the failed Put's record is whole: only its index entry failed
	}{
		{"shard header", 0, 0, false},
		{"first record", 1, 0, false},
		{"first index entry", 2, 0, true},
		{"record", 3, 1, false},
		{"index entry", 4, 1, true},
		{"second shard header", 5, 2, false},
		{"record in second shard", 6, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var logs []string
			logf := func(format string, args ...any) {
				logs = append(logs, fmt.Sprintf(format, args...))
				t.Logf(format, args...)
			}
			o := Options{Codec: Raw, ShardBytes: 1 << 16, Logf: logf}
			c := open(t, dir, o)
			d := newCoder(t, c)
			calls := failWritesAfter(t, tc.ok)
			n := 0
			var err error
			for ; n < 100; n++ {
				if err = d.Put(testKey(n), n, testImage(uint64(n), w, w, true)); err != nil {
					break
				}
			}
			if !errors.Is(err, ErrDisabled) || !errors.Is(err, syscall.ENOSPC) || n != tc.stored {
				t.Fatalf("Put %d: %v; want ErrDisabled wrapping ENOSPC at Put %d", n, err, tc.stored)
			}
			s := c.Stats()
			if !strings.Contains(s.Disabled, "disk is full") || s.Written != int64(n) || len(logs) != 1 || !strings.Contains(logs[0], "disk is full") {
				t.Errorf("Stats %+v, logs %q; want writing disabled because the disk is full, logged once", s, logs)
			}
			before := calls.Load()
			for i := range 3 {
				if err := d.Put(testKey(1000+i), 0, testImage(1, 2, 2, true)); !errors.Is(err, ErrDisabled) {
					t.Errorf("Put after disabling: %v, want ErrDisabled", err)
				}
			}
			if calls.Load() != before || len(logs) != 1 {
				t.Errorf("Puts after disabling wrote %d times, logged %d lines", calls.Load()-before, len(logs))
			}
			if s := c.Stats(); s.Rejected != 4 {
				t.Errorf("Stats counts %d rejected Puts, want 4", s.Rejected)
			}
			checkAll(t, c, n, w)
			c.Close()

			c = open(t, dir, Options{ReadOnly: true})
			want := n
			if tc.lastWhole {
				want++ // found by scanning the shard
			}
			if s := c.Stats(); s.Records != want {
				t.Errorf("reopened: %d records, want %d", s.Records, want)
			}
			checkAll(t, c, want, w)
			rep, err := c.Verify(func(p Problem) { t.Errorf("Verify: %+v", p) })
			if err != nil || rep.Damaged != 0 || rep.Unreadable != 0 {
				t.Errorf("Verify: %+v, %v", rep, err)
			}
			if n := len(files(t, dir, shardExt)); n != c.Stats().Shards {
				t.Errorf("%d shard files, %d of them readable: a shard whose header failed to write was left", n, c.Stats().Shards)
			}
		})
	}
}

// TestDiskFullTmpfs fills a real, small file system.
func TestDiskFullTmpfs(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root on Linux")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	cdir := filepath.Join(dir, "cache")
	var logs int
	c := open(t, cdir, Options{Codec: Raw, ShardBytes: 1 << 18, Logf: logTo(t, &logs)})
	d := newCoder(t, c)
	const w = 60
	n := 0
	var err error
	for ; n < 1000; n++ {
		if err = d.Put(testKey(n), n, testImage(uint64(n), w, w, true)); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrDisabled) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Put %d into a full tmpfs: %v, want ErrDisabled wrapping ENOSPC", n, err)
	}
	if s := c.Stats(); !strings.Contains(s.Disabled, "disk is full") || logs != 1 || n < 100 {
		t.Errorf("after %d Puts: Stats %+v, %d log lines", n, s, logs)
	}
	if err := d.Put(testKey(n+1), 0, testImage(1, 1, 1, true)); !errors.Is(err, ErrDisabled) {
		t.Errorf("Put after disabling: %v", err)
	}
	checkAll(t, c, n, w)
	c.Close()
	c = open(t, cdir, Options{ReadOnly: true})
	checkAll(t, c, n, w)
	rep, err := c.Verify(func(p Problem) { t.Errorf("Verify: %+v", p) })
	// The write that failed is cut off again: no torn record is left behind.
	if err != nil || rep.Damaged != 0 || rep.Unreadable != 0 {
		t.Errorf("Verify: %+v, %v", rep, err)
	}
	t.Logf("%d records stored before the 2 MiB tmpfs filled; Verify: %+v", n, rep)
}
