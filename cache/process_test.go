package cache

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/decode"
)

// helperEnv, when set, makes TestHelperWriter a writer process for the tests below:
// "MODE DIR CODEC FIRST COUNT". Mode "loop" stores records FIRST, FIRST+1, ... until it is
// killed; mode "range" stores COUNT records once a line arrives on stdin, then closes
// the cache and exits. After each Put returns, the writer prints "stored N".
const helperEnv = "CONVEYOR_CACHE_HELPER"

// Records of the writer processes: small shards, so that they rotate often.
const (
	procShardBytes = 1 << 20
	procSpec       = "helper-spec"
)

func procKey(n int) Key {
	return Key{Spec: procSpec, Path: fmt.Sprintf("p/%07d.png", n), Size: int64(n), ModTime: int64(n) * 1000}
}

// procImage is record n's image, about 100 KB of noise made cheaply, so that the writer
// spends much of its time writing and a kill often lands inside a write.
func procImage(n int) *decode.Image {
	procNoiseOnce.Do(func() {
		procNoise = make([]byte, 3*216*162)
		for i := range procNoise {
			procNoise[i] = byte(splitmix(uint64(i)))
		}
	})
	img := &decode.Image{}
	img.Reset(200+n%17, 150+n%13)
	copy(img.Pix, procNoise)
	binary.LittleEndian.PutUint64(img.Pix, uint64(n))
	binary.LittleEndian.PutUint64(img.Pix[len(img.Pix)-8:], ^uint64(n))
	return img
}

var (
	procNoiseOnce sync.Once
	procNoise     []byte
)

func TestHelperWriter(t *testing.T) {
	args := strings.Fields(os.Getenv(helperEnv))
	if len(args) == 0 {
		return // not a helper process
	}
	if err := helperWriter(args); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

func helperWriter(args []string) error {
	mode, dir, codec := args[0], args[1], Codec(args[2])
	first, _ := strconv.Atoi(args[3])
	count, _ := strconv.Atoi(args[4])
	c, err := Open(dir, &Options{Codec: codec, ShardBytes: procShardBytes, Logf: func(string, ...any) {}})
	if err != nil {
		return err
	}
	d := c.NewCoder()
	if mode == "range" {
		fmt.Println("ready")
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return err
		}
	}
	for n := first; mode == "loop" || n < first+count; n++ {
		if err := d.Put(procKey(n), n, procImage(n)); err != nil {
			return err
		}
		fmt.Printf("stored %d\n", n)
	}
	d.Close()
	return c.Close()
}

// startWriter starts a writer process; lines delivers what it prints, line by line,
// and is closed when it exits.
func startWriter(t *testing.T, args string) (cmd *exec.Cmd, stdin io.WriteCloser, lines <-chan string) {
	t.Helper()
	cmd = exec.Command(os.Args[0], "-test.run=^TestHelperWriter$")
	cmd.Env = append(os.Environ(), helperEnv+"="+args)
	cmd.Stderr = &testWriter{t: t}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := make(chan string, 1024)
	go func() {
		defer close(ch)
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return // a line cut short by a kill is dropped
			}
			ch <- strings.TrimSuffix(line, "\n")
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		for range ch {
		}
	})
	return cmd, stdin, ch
}

type testWriter struct {
	mu sync.Mutex
	t  *testing.T
}

func (w *testWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Logf("writer: %s", b)
	return len(b), nil
}

// stored parses a "stored N" line.
func stored(t *testing.T, line string) int {
	t.Helper()
	s, ok := strings.CutPrefix(line, "stored ")
	n, err := strconv.Atoi(s)
	if !ok || err != nil {
		t.Fatalf("writer printed %q", line)
	}
	return n
}

// checkStored opens dir and checks that every record in want loads with its pixels and
// that no record is damaged.
func checkStored(t *testing.T, dir string, want []int) {
	t.Helper()
	c := open(t, dir, Options{ReadOnly: true})
	d := newCoder(t, c)
	var dst decode.Image
	for _, n := range want {
		r, ok := c.Lookup(procKey(n))
		if !ok {
			t.Errorf("record %d, reported stored, is missing", n)
			continue
		}
		got, err := d.Load(&dst, r)
		if err != nil {
			t.Errorf("record %d: %v", n, err)
			continue
		}
		if diff := samePixels(got, procImage(n)); diff != "" || r.Label != int32(n) {
			t.Errorf("record %d (label %d): %s", n, r.Label, diff)
		}
	}
	rep, err := c.Verify(func(p Problem) { t.Errorf("Verify: %+v", p) })
	if err != nil || rep.Damaged != 0 || rep.Records < len(want) {
		t.Errorf("Verify: %+v, %v; want ≥ %d records, none damaged", rep, err, len(want))
	}
	t.Logf("%d records reported stored; the directory holds %d in %d shards, %d torn shards", len(want), rep.Records, rep.Shards, rep.TornShards)
}

// TestKilledWriter kills a writer process at random points, several times over one
// directory: every record it reported stored must survive, with its pixels.
func TestKilledWriter(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	var all []int
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for round, codec := range []Codec{S2, Raw, Zstd, S2, Raw} {
		cmd, _, lines := startWriter(t, fmt.Sprintf("loop %s %s %d 0", dir, codec, 100_000*round))
		got := 0
		for line := range lines {
			all = append(all, stored(t, line))
			if got++; got == 40 {
				break
			}
		}
		if got < 40 {
			t.Fatalf("round %d: the writer exited after %d records", round, got)
		}
		// Kill at a random moment, not only right after a print.
		if round > 0 {
			time.Sleep(time.Duration(rng.IntN(20_000)) * time.Microsecond)
		}
		cmd.Process.Kill()
		cmd.Wait()
		for line := range lines {
			all = append(all, stored(t, line))
		}
		checkStored(t, dir, all)
	}
}

// TestTwoWriters runs two writer processes on one directory at once, each with its own
// records, while this process refreshes a Cache opened before they started.
func TestTwoWriters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	c := open(t, dir, Options{})
	const count = 60
	var want []int
	var stdins []io.WriteCloser
	var outs []<-chan string
	var cmds []*exec.Cmd
	for i, codec := range []Codec{S2, Zstd} {
		cmd, stdin, lines := startWriter(t, fmt.Sprintf("range %s %s %d %d", dir, codec, 1000*i, count))
		if line := <-lines; line != "ready" {
			t.Fatalf("writer %d printed %q", i, line)
		}
		cmds, stdins, outs = append(cmds, cmd), append(stdins, stdin), append(outs, lines)
		for n := range count {
			want = append(want, 1000*i+n)
		}
	}
	for _, w := range stdins {
		io.WriteString(w, "go\n")
	}

	// Read what is there while they write: every record found must be whole.
	d := newCoder(t, c)
	var dst decode.Image
	seen := map[int]bool{}
	for done := false; !done; {
		done = true
		for _, lines := range outs {
			select {
			case _, ok := <-lines:
				done = done && !ok
			default:
				done = false
			}
		}
		if err := c.Refresh(); err != nil {
			t.Fatal(err)
		}
		for _, n := range want {
			if r, ok := c.Lookup(procKey(n)); ok && !seen[n] {
				seen[n] = true
				got, err := d.Load(&dst, r)
				if err != nil {
					t.Fatalf("record %d while writing: %v", n, err)
				}
				if diff := samePixels(got, procImage(n)); diff != "" {
					t.Fatalf("record %d while writing: %s", n, diff)
				}
			}
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}

	if err := c.Refresh(); err != nil {
		t.Fatal(err)
	}
	for _, n := range want {
		got, _ := mustLoad(t, c, d, procKey(n))
		if diff := samePixels(got, procImage(n)); diff != "" {
			t.Errorf("record %d: %s", n, diff)
		}
	}
	if s := c.Stats(); s.Records != len(want) || s.Bytes != diskBytes(t, dir) {
		t.Errorf("after Refresh: Stats %+v; want %d records, %d bytes", s, len(want), diskBytes(t, dir))
	}
	checkStored(t, dir, want)
	rep, err := c.Verify(func(p Problem) { t.Errorf("Verify: %+v", p) })
	if err != nil || rep.Damaged != 0 || rep.TornShards != 0 || rep.Records != len(want) {
		t.Errorf("Verify: %+v, %v", rep, err)
	}
}

// Two writer processes storing the same records at the same time (two loaders sharing a
// cache directory, reading the same order) store each record once between them: a Put
// first catches up with what the other stored. Each stored every record.
func TestSameRecordsTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	const count = 150
	var stdins []io.WriteCloser
	var outs []<-chan string
	for range 2 {
		_, stdin, lines := startWriter(t, fmt.Sprintf("range %s %s 0 %d", dir, Raw, count))
		if line := <-lines; line != "ready" {
			t.Fatalf("writer printed %q", line)
		}
		stdins, outs = append(stdins, stdin), append(outs, lines)
	}
	for _, in := range stdins {
		io.WriteString(in, "go\n")
	}
	for _, lines := range outs {
		for range lines {
		}
	}
	want := make([]int, count)
	for i := range want {
		want[i] = i
	}
	checkStored(t, dir, want)
	c := open(t, dir, Options{ReadOnly: true})
	rep, err := c.Verify(nil)
	if err != nil || rep.Records != count {
		t.Errorf("the directory holds %d records (%v), want %d: each stored once", rep.Records, err, count)
	}
}

// A process stopped while it holds the directory's lock (SIGSTOP, a suspended job) held
// up every Put of every other loader sharing the directory until it ran again: storing
// is optional, so a Put gives up after putLockWait with ErrBusy, and stores again once
// the lock is free.
func TestPutLockHeld(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, Options{})
	defer func(d time.Duration) { putLockWait = d }(putLockWait)
	putLockWait = 50 * time.Millisecond
	other, err := os.OpenFile(dir+string(os.PathSeparator)+lockName, os.O_RDWR, 0) // another open file: another holder
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := lock(other); err != nil {
		t.Skip("no locks here:", err)
	}
	d := c.NewCoder()
	done := make(chan error, 1)
	go func() { done <- d.Put(procKey(1), 1, procImage(1)) }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrBusy) || !Refused(err) {
			t.Fatalf("Put with the lock held elsewhere: %v, want ErrBusy", err)
		}
	case <-time.After(5 * time.Second):
		unlock(other)
		<-done
		t.Fatal("Put waited for the lock another holder kept")
	}
	if st := c.Stats(); st.Rejected != 1 || st.Written != 0 {
		t.Errorf("stats %+v, want 1 rejected", st)
	}
	unlock(other)
	if err := d.Put(procKey(2), 2, procImage(2)); err != nil {
		t.Fatalf("Put once the lock is free: %v", err)
	}
}

// TestPutLockFails: on a file system whose locks fail (NFS without a lock daemon), a Put
// writes nothing unguarded: writing is disabled, with the reason, and nothing is stored.
func TestPutLockFails(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, Options{})
	defer func(f func(*os.File) (bool, error)) { tryLockHook = f }(tryLockHook)
	tryLockHook = func(*os.File) (bool, error) { return false, syscall.ENOLCK }
	d := c.NewCoder()
	err := d.Put(procKey(1), 1, procImage(1))
	if !errors.Is(err, ErrDisabled) || !errors.Is(err, syscall.ENOLCK) {
		t.Fatalf("Put when the lock fails: %v, want ErrDisabled wrapping ENOLCK", err)
	}
	if st := c.Stats(); st.Written != 0 || st.Rejected != 1 {
		t.Errorf("stats %+v, want nothing written, 1 rejected", st)
	}
}
