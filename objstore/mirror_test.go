package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/internal/s3test"
	"github.com/conveyor-ml/conveyor/objstore"
)

// Create stores an object only when its name is free, in S3 (If-None-Match: *) and on
// local disk; Mirror copies a flat listing into a directory and refuses nested names.
func TestCreateAndMirror(t *testing.T) { s3test.Each(t, testCreateAndMirror) }

func testCreateAndMirror(t *testing.T, srv *s3test.Server) {
	srv.Env(t, "")
	ctx := context.Background()
	for _, root := range []string{srv.URL("create/"), t.TempDir() + "/"} {
		b, err := objstore.OpenBucket(ctx, root, fastRetry)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		first, second := []byte("first"), []byte("second!")
		if err := b.Create(ctx, "rec.json", bytes.NewReader(first), int64(len(first))); err != nil {
			t.Fatalf("%s: Create: %v", root, err)
		}
		err = b.Create(ctx, "rec.json", bytes.NewReader(second), int64(len(second)))
		if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "rec.json") {
			t.Fatalf("%s: Create of an existing object: %v, want fs.ErrExist naming it", root, err)
		}
		if err := b.Put(ctx, "a.bin", bytes.NewReader(second), int64(len(second))); err != nil {
			t.Fatal(err)
		}
		objs, err := b.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := objstore.Mirror(ctx, b, objs, dir, 2); err != nil {
			t.Fatalf("%s: Mirror: %v", root, err)
		}
		for name, want := range map[string][]byte{"rec.json": first, "a.bin": second} {
			if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: mirrored %s = %q, %v; want %q", root, name, got, err, want)
			}
		}
		if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
			t.Errorf("%s: temporary files left: %v", root, left)
		}
		err = objstore.Mirror(ctx, b, []objstore.Object{{Name: "missing.bin"}}, t.TempDir(), 1)
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "missing.bin") {
			t.Errorf("%s: Mirror of a missing object: %v", root, err)
		}
		if err := objstore.Mirror(ctx, b, []objstore.Object{{Name: "sub/x"}}, t.TempDir(), 1); err == nil || !strings.Contains(err.Error(), "sub/x") {
			t.Errorf("%s: Mirror of a nested name: %v", root, err)
		}
	}
}

// Mirror's first failure is what it returns, and it stops the rest; a cancelled context
// mirrors nothing and says so.
func TestMirrorFirstError(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	var objs []objstore.Object
	for i := range 40 {
		name := fmt.Sprintf("s-%02d.bin", i)
		if i != 7 { // s-07.bin is missing
			if err := os.WriteFile(filepath.Join(src, name), []byte(name), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		objs = append(objs, objstore.Object{Name: name, Size: 64})
	}
	b, err := objstore.OpenBucket(ctx, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	err = objstore.Mirror(ctx, b, objs, dir, 3)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "s-07.bin") {
		t.Errorf("Mirror with s-07.bin missing: %v, want fs.ErrNotExist naming it", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	dir = t.TempDir()
	if err := objstore.Mirror(cancelled, b, objs, dir, 3); !errors.Is(err, context.Canceled) {
		t.Errorf("Mirror with a cancelled context: %v, want context.Canceled", err)
	}
	if got, _ := os.ReadDir(dir); len(got) != 0 {
		t.Errorf("Mirror with a cancelled context wrote %d files", len(got))
	}
}
