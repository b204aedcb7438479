//go:build unix

package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/internal/files"
	"github.com/conveyor-ml/conveyor/internal/treetest"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// A named pipe with an image name in a class folder is a bad sample found by stat: it is
// never opened, so nothing waits for a writer that never comes.
func TestNamedPipeIsABadSample(t *testing.T) {
	dir := treetest.New(t, 2, 5)
	fifo := filepath.Join(dir, "class01", "pipe.jpg")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for name, open := range map[string]func() (pipeline.FileSource, error){
		"Dir":         func() (pipeline.FileSource, error) { return Dir(dir, nil) },
		"ImageFolder": func() (pipeline.FileSource, error) { return ImageFolder(os.DirFS(dir), ".", nil) },
	} {
		t.Run(name, func(t *testing.T) {
			src, err := open()
			if err != nil {
				t.Fatal(err)
			}
			cfg := testConfig(2)
			cfg.Bad.MaxFraction = -1
			ld := newLoader(t, src, cfg)
			done := make(chan epochData, 1)
			go func() { done <- collect(t, ld, context.Background(), 0, 0) }()
			select {
			case d := <-done:
				st := ld.Stats()
				if st.Bad.Samples != 1 || len(d.indices) != src.Len() || !errors.Is(st.Bad.Recent[0].Err, files.ErrNotRegular) || !strings.Contains(st.Bad.Recent[0].Error(), "named pipe") {
					t.Fatalf("%d bad samples (%v), %d of %d delivered", st.Bad.Samples, st.Bad.Recent, len(d.indices), src.Len())
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the epoch hangs on a named pipe")
			}
		})
	}
}

// stuckSource opens every sample as a named pipe in blocking mode, as a read stuck in the
// kernel (a hung network mount) would block: open waits for a writer.
type stuckSource struct {
	pipeline.FileSource
	fifo string
}

func (s stuckSource) Open(int) (fs.File, error) { return os.Open(s.fifo) }

// Cancelling the context and Close return promptly while reads are stuck in the kernel;
// the stuck reads are abandoned and exit once the kernel returns.
func TestStuckReadsDoNotHoldCancelOrClose(t *testing.T) {
	src, err := Dir(treetest.Shared(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(t.TempDir(), "stuck")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// Unblock the stuck opens at the end, so their goroutines exit before the leak check.
	defer func() {
		for range 64 {
			w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				return // no reader left waiting
			}
			w.Close()
		}
	}()
	ld, err := pipeline.New(stuckSource{src, fifo}, testConfig(2))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	for b, err := range ld.Epoch(ctx, 0) {
		if err == nil {
			b.Release()
			t.Fatal("a batch from a source whose reads never return")
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("epoch ended with %v, want context.Canceled", err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancelling took %v", d)
	}
	start = time.Now()
	if err := ld.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v", d)
	}
}

// Linux allows any bytes but '/' and NUL in names: a class folder and files whose names
// are not valid UTF-8 load like any other, and messages quote them.
func TestNonUTF8Names(t *testing.T) {
	dir := treetest.New(t, 2, 4)
	if err := os.Rename(filepath.Join(dir, "class01"), filepath.Join(dir, "cl\xffss")); err != nil {
		t.Skipf("this file system refuses non-UTF-8 names: %v", err)
	}
	files := treetest.Files(t, filepath.Join(dir, "class00"))
	if err := os.Rename(files[0], filepath.Join(dir, "class00", "caf\xe9.jpg")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "class00", "bad\xfe.jpg"), []byte("not an image"), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := Dir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := src.Classes(); len(c) != 2 || c[1] != "cl\xffss" {
		t.Fatalf("classes %q", c)
	}
	cfg := testConfig(2)
	cfg.Bad.MaxFraction = -1
	var mu sync.Mutex
	var lines []string
	cfg.Logf = func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, fmt.Sprintf(format, args...))
	}
	ld := newLoader(t, src, cfg)
	d := collect(t, ld, context.Background(), 0, 0)
	st := ld.Stats()
	if st.Bad.Samples != 1 || len(d.indices) != src.Len() || st.Bad.Recent[0].Path != "class00/bad\xfe.jpg" {
		t.Fatalf("%d bad samples (%v), %d of %d delivered", st.Bad.Samples, st.Bad.Recent, len(d.indices), src.Len())
	}
	if len(lines) != 1 || !strings.Contains(lines[0], `"class00/bad\xfe.jpg"`) {
		t.Errorf("log %q: want the name quoted", lines)
	}
}
