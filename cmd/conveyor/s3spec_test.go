package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/internal/s3test"
	"github.com/conveyor-ml/conveyor/objstore"
)

// Two parts of one conversion into S3 run with different --size: the one that finds
// dataset.json stored by the other fails naming its URL, never the staging copy; and
// when both made their dataset.json before either uploaded (started at once), the one
// that loses the conditional PUT reads the winner's back and fails too, before its
// part record is stored, so the dataset keeps opening as the winner's. Both exited 0
// and left a dataset nobody could open.
func TestConvertS3PartSpecs(t *testing.T) { s3test.Each(t, testConvertS3PartSpecs) }

func testConvertS3PartSpecs(t *testing.T, srv *s3test.Server) {
	srv.Env(t, "")
	t.Setenv("TMPDIR", t.TempDir())
	src, _ := badTree(t)
	url := srv.URL("specs/")
	if out, stderr, err := runConvert(t, src, url, "--part", "0/2", "--size", "32", "--workers", "2"); err != nil {
		t.Fatalf("part 0/2: %v\n%s%s", err, out, stderr)
	}
	// Started after part 0/2 uploaded: refused as it starts.
	_, _, err := runConvert(t, src, url, "--part", "1/2", "--size", "48", "--workers", "2")
	if err == nil || !strings.Contains(err.Error(), srv.URL("specs/"+cache.InfoName)) || strings.Contains(err.Error(), "conveyor-convert-") || !strings.Contains(err.Error(), "resize=shorter(48)") {
		t.Fatalf("part 1/2 converting with another --size after part 0/2 uploaded: %v, want an error naming %s", err, srv.URL("specs/"+cache.InfoName))
	}
	// Started at once: its staging directory made its own dataset.json (here, by
	// converting into another prefix first), and it loses the conditional PUT.
	staging := t.TempDir()
	if out, stderr, err := runConvert(t, src, srv.URL("elsewhere/"), "--part", "1/2", "--size", "48", "--workers", "2", "--staging", staging); err != nil {
		t.Fatalf("part 1/2 elsewhere: %v\n%s%s", err, out, stderr)
	}
	out, stderr, err := runConvert(t, src, url, "--part", "1/2", "--size", "48", "--workers", "2", "--staging", staging)
	if err == nil || !strings.Contains(err.Error(), srv.URL("specs/"+cache.InfoName)) || !strings.Contains(err.Error(), "resize=shorter(48)") || strings.Contains(err.Error(), staging) {
		t.Fatalf("part 1/2 losing the race for dataset.json with another --size: %v, want an error naming %s\n%s%s", err, srv.URL("specs/"+cache.InfoName), out, stderr)
	}
	b, err := objstore.OpenBucket(context.Background(), url, fastS3)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Stat(context.Background(), cache.Part{Index: 1, Count: 2}.PartInfoName()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the losing part stored its record beside a dataset.json of another spec")
	}
	// The dataset is still the winner's: part 1/2 converted as part 0/2 completes it.
	if out, stderr, err := runConvert(t, src, url, "--part", "1/2", "--size", "32", "--workers", "2", "--delete-orphans"); err != nil {
		t.Fatalf("part 1/2 as part 0/2: %v\n%s%s", err, out, stderr)
	}
	var vout bytes.Buffer
	if err := verify([]string{url}, &vout, io.Discard); err != nil || !strings.Contains(vout.String(), "records=24 ") {
		t.Fatalf("verify %s: %v\n%s", url, err, vout.String())
	}
	// A complete part, or a complete whole conversion, of another --size is not "this
	// conversion, complete; nothing to do".
	out, stderr, err = runConvert(t, src, url, "--part", "0/2", "--size", "48", "--workers", "2")
	if err == nil || strings.Contains(out, "nothing to convert") || !strings.Contains(err.Error(), "resize=shorter(48)") || !strings.Contains(err.Error(), url) {
		t.Fatalf("part 0/2 again with another --size: %v\n%s%s", err, out, stderr)
	}
	whole := srv.URL("specs-whole/")
	if out, stderr, err := runConvert(t, src, whole, "--size", "32", "--workers", "2"); err != nil {
		t.Fatalf("convert: %v\n%s%s", err, out, stderr)
	}
	out, stderr, err = runConvert(t, src, whole, "--size", "48", "--workers", "2")
	if err == nil || strings.Contains(out, "nothing to convert") || !strings.Contains(err.Error(), "resize=shorter(32)") || !strings.Contains(err.Error(), srv.URL("specs-whole/"+cache.InfoName)) {
		t.Fatalf("a whole conversion again with another --size: %v\n%s%s", err, out, stderr)
	}
	if out, stderr, err := runConvert(t, src, whole, "--size", "32", "--workers", "2"); err != nil || !strings.Contains(out, "nothing to convert") {
		t.Fatalf("a whole conversion again with the same flags: %v\n%s%s", err, out, stderr)
	}
}

// Two parts converting into one local directory at once with different --size: one
// fails naming dataset.json, the other's conversion stands.
func TestConvertPartSpecsLocal(t *testing.T) {
	src, _ := badTree(t)
	dst := filepath.Join(t.TempDir(), "dst")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, size := range []string{"32", "48"} {
		wg.Go(func() {
			_, _, errs[i] = runConvert(t, src, dst, "--part", []string{"0/2", "1/2"}[i], "--size", size, "--workers", "2")
		})
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("two parts of other sizes into %s: %v, %v; want one refused", dst, errs[0], errs[1])
	}
	for _, err := range errs {
		if err != nil && (!strings.Contains(err.Error(), filepath.Join(dst, cache.InfoName)) || !strings.Contains(err.Error(), "same size and codec")) {
			t.Fatalf("refused with %v, want it to name %s", err, filepath.Join(dst, cache.InfoName))
		}
	}
}
