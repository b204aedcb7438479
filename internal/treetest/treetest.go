// Package treetest writes ImageFolder trees of synthetic images for the tests of the
// loader and of the sources: a shared read-only tree, private trees a test may damage,
// and the damage itself (corrupt, truncated, empty, huge and unreadable files).
package treetest

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/conveyor-ml/conveyor/internal/synth"
)

var (
	sharedOnce sync.Once
	sharedDir  string
	sharedErr  error
)

// Shared is a small mixed-format ImageFolder tree (3 classes of 20 images, every
// format) shared by read-only tests. Remove it with Cleanup from TestMain.
func Shared(t testing.TB) string {
	t.Helper()
	sharedOnce.Do(func() {
		sharedDir, sharedErr = os.MkdirTemp("", "conveyor-test-tree-")
		if sharedErr == nil {
			_, sharedErr = synth.WriteTree(sharedDir, &synth.TreeOptions{Classes: 3, PerClass: 20, Seed: 7, MinSide: 40, MaxSide: 120, Formats: synth.AllFormats()})
		}
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return sharedDir
}

// Cleanup removes the shared tree, if one was written.
func Cleanup() {
	if sharedDir != "" {
		os.RemoveAll(sharedDir)
	}
}

// New writes a private tree the test may damage, removed when the test ends.
func New(t testing.TB, classes, perClass int) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := synth.WriteTree(dir, &synth.TreeOptions{Classes: classes, PerClass: perClass, Seed: 3, MinSide: 40, MaxSide: 100, Formats: synth.AllFormats()}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Corrupt adds bad files to the tree at dir (which needs classes class00 and class01
// holding a JPEG and a PNG) and returns their paths relative to dir by kind: "corrupt",
// "truncated", "zero-byte", "not-image", "huge", "truncpng", "misnamed" (a JPEG named
// .png, which decodes: content decides) and "unreadable" (a good JPEG the test makes
// unreadable itself).
func Corrupt(t testing.TB, dir string) map[string]string {
	t.Helper()
	files := Files(t, dir)
	jpg := readFirst(t, files, ".jpg")
	png := readFirst(t, files, ".png")
	w := func(rel string, data []byte) string {
		p := filepath.Join(dir, rel)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return rel
	}
	return map[string]string{
		"corrupt":    w("class00/zz-corrupt.jpg", append(slices.Clone(jpg[:200]), bytes.Repeat([]byte{0x55}, 3000)...)),
		"truncated":  w("class01/zz-truncated.jpg", jpg[:len(jpg)/3]),
		"zero-byte":  w("class00/zz-empty.png", nil),
		"not-image":  w("class00/zz-text.jpg", []byte("this is not an image at all\n")),
		"huge":       w("class01/zz-huge.png", HugePNG()),
		"truncpng":   w("class01/zz-trunc.png", png[:len(png)/2]),
		"misnamed":   w("class00/zz-really-jpeg.png", jpg),
		"unreadable": w("class01/zz-unreadable.jpg", jpg),
	}
}

// Files lists the files below dir, sorted.
func Files(t testing.TB, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

func readFirst(t testing.TB, files []string, ext string) []byte {
	t.Helper()
	for _, f := range files {
		if filepath.Ext(f) == ext {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatalf("no %s file in tree", ext)
	return nil
}

// Rel is p relative to dir, with forward slashes.
func Rel(t testing.TB, dir, p string) string {
	t.Helper()
	r, err := filepath.Rel(dir, p)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.ToSlash(r)
}

// HugePNG is a PNG header claiming 100000×100000 pixels with nothing behind it.
func HugePNG() []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := []byte{0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0, 8, 2, 0, 0, 0}
	b.Write([]byte{0, 0, 0, 13})
	chunk := append([]byte("IHDR"), ihdr...)
	b.Write(chunk)
	b.Write(binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(chunk)))
	return b.Bytes()
}

// FlipBit flips one bit of the n bytes at off in file (a quarter before their end: in a
// record's payload), as a damaged disk would.
func FlipBit(t testing.TB, file string, off, n int64) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	at := off + n - 1 - n/4
	b := []byte{0}
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}
