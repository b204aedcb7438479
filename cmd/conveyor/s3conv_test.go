package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/source"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/internal/s3test"
	"github.com/conveyor-ml/conveyor/objstore"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// s3Epoch opens url with source.Open and returns one epoch of a seeded train
// loader over it: the batches' bytes and labels, concatenated.
func s3Epoch(t *testing.T, url string, o *source.OpenOptions) ([]byte, []int32, objstore.Stats) {
	t.Helper()
	ctx := context.Background()
	d, err := source.Open(ctx, url, o)
	if err != nil {
		t.Fatalf("OpenDataset(%s): %v", url, err)
	}
	defer d.Close()
	opened := d.Stats()
	// Named by its URL, in a line (bench and inspect print it).
	if name := d.String(); !strings.HasPrefix(name, "converted:"+strings.TrimSuffix(url, "/")+" (") || len(name) > 300 {
		t.Errorf("dataset named %.300q", name)
	}
	cfg := &pipeline.Config{Batch: pipeline.BatchConfig{Size: 4}, Tuning: pipeline.TuningConfig{Workers: 2}, Order: pipeline.OrderConfig{Seed: 7}, Pack: pack.Options{DType: pack.Float32, Normalize: true}, Logf: func(string, ...any) {}}
	if err := pipeline.ApplyRecipe(cfg, "train", 24); err != nil {
		t.Fatal(err)
	}
	ld, err := pipeline.New(d.Source, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Close()
	var data []byte
	var labels []int32
	for b, err := range ld.Epoch(ctx, 1) {
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		data = append(data, b.Data...)
		labels = append(labels, b.Labels...)
		b.Release()
	}
	// Streamed: opening fetched the indexes, the epoch the shards.
	if st := d.Stats(); d.Remote() && (opened.Fetched != 0 || st.BytesFetched <= opened.BytesFetched || st.Fetched == 0) {
		t.Errorf("%s: not streamed: %v at open, %v after the epoch", url, opened, st)
	}
	return data, labels, d.Stats()
}

var fastS3 = &objstore.Options{Retry: objstore.RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond, AttemptTimeout: 10 * time.Second}}

// conveyor convert SRC s3://... writes a converted dataset into a real S3 server, whole
// and in two parts run at once; read back by OpenDataset it trains to the same batches
// as a local conversion of the same tree, also through a proxy injecting faults. A rerun
// uploads nothing; a deleted shard is uploaded again; a missing part is named by verify
// and by OpenDataset; inspect and verify read the dataset from its URL.
func TestConvertS3(t *testing.T) { s3test.Each(t, testConvertS3) }

func testConvertS3(t *testing.T, srv *s3test.Server) {
	srv.Env(t, "")
	t.Setenv("TMPDIR", t.TempDir()) // default staging directories
	src, _ := badTree(t)
	flags := []string{"--size", "32", "--workers", "2"}
	local := filepath.Join(t.TempDir(), "local")
	if out, stderr, err := runConvert(t, append([]string{src, local}, flags...)...); err != nil {
		t.Fatalf("local convert: %v\n%s%s", err, out, stderr)
	}
	wantData, wantLabels, _ := s3Epoch(t, local, nil)

	whole := srv.URL("whole/")
	staging := t.TempDir()
	out, stderr, err := runConvert(t, append([]string{src, whole, "--staging", staging}, flags...)...)
	if err != nil || !strings.Contains(out, "uploaded=") || !strings.Contains(out, "unchanged=0 ") {
		t.Fatalf("convert to %s: %v\n%s%s", whole, err, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(src, "..", "s3:")); err == nil {
		t.Error("convert wrote a local s3: directory")
	}
	data, labels, st := s3Epoch(t, whole, &source.OpenOptions{Store: fastS3, Cache: &objstore.ShardCacheOptions{Dir: t.TempDir()}})
	if !bytes.Equal(data, wantData) || !slices.Equal(labels, wantLabels) || st.BytesFetched == 0 {
		t.Fatalf("the dataset read from %s trains to other batches than the local conversion (%d vs %d bytes; %v)", whole, len(data), len(wantData), st)
	}

	// Rerun: every shard is already there (the report and dataset.json are always
	// uploaded); then a shard deleted, as if its upload had been interrupted, is
	// uploaded again.
	out, _, err = runConvert(t, append([]string{src, whole, "--staging", staging}, flags...)...)
	if err != nil || !strings.Contains(out, "stored=0 ") || !strings.Contains(out, "uploaded=2 ") {
		t.Fatalf("rerun: %v\n%s", err, out)
	}
	b, err := objstore.OpenBucket(context.Background(), whole, fastS3)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	objs, err := b.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var shard string
	for _, o := range objs {
		if strings.HasSuffix(o.Name, ".shard") {
			shard = o.Name
		}
	}
	if shard == "" {
		t.Fatalf("no shard among %v", objs)
	}
	srv.Delete(t, "whole/"+shard)
	out, _, err = runConvert(t, append([]string{src, whole, "--staging", staging}, flags...)...)
	if err != nil || !strings.Contains(out, "stored=0 ") || !strings.Contains(out, "uploaded=3 ") {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if data, _, _ := s3Epoch(t, whole, &source.OpenOptions{Store: fastS3}); !bytes.Equal(data, wantData) {
		t.Fatal("after the resumed upload, other batches")
	}
	// From another staging directory: nothing to do when the dataset is complete, and
	// refused when it is not (it would add a second copy of every sample).
	if out, _, err := runConvert(t, append([]string{src, whole}, flags...)...); err != nil || !strings.Contains(out, "nothing to convert") {
		t.Fatalf("convert into a complete s3 dataset from a new staging directory: %v\n%s", err, out)
	}
	full := srv.URL("full/")
	if out, _, err := runConvert(t, append([]string{src, full, "--staging", t.TempDir(), "--max-bytes", "20K"}, flags...)...); err == nil || !strings.Contains(out, "uploaded=") {
		t.Fatalf("convert with --max-bytes 20K: %v\n%s", err, out)
	}
	if _, _, err := runConvert(t, append([]string{src, full}, flags...)...); err == nil || !strings.Contains(err.Error(), "already holds a converted dataset") || !strings.Contains(err.Error(), full) {
		t.Fatalf("convert into an incomplete s3 dataset from a new staging directory: %v", err)
	}
	// With --delete-orphans it converts again and, once uploaded, deletes what the lost
	// run stored, and aborts an upload a killed run left unfinished.
	fb, err := objstore.OpenBucket(context.Background(), full, fastS3)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	lost := shardFiles(t, fb)
	srv.StartUpload(t, "full/0123456789abcdef-01234567.shard", bytes.Repeat([]byte{7}, 1<<16))
	out, stderr, err = runConvert(t, append([]string{src, full, "--delete-orphans"}, flags...)...)
	if err != nil || !strings.Contains(out, fmt.Sprintf("deleted=%d ", len(lost))) || !strings.Contains(out, "aborted_uploads=1 ") {
		t.Fatalf("convert --delete-orphans over a lost run: %v\n%s%s", err, out, stderr)
	}
	now := shardFiles(t, fb)
	for _, n := range lost {
		if slices.Contains(now, n) {
			t.Errorf("%s, the lost run's, is still there", n)
		}
	}
	if ups, err := fb.Uploads(context.Background(), ""); err != nil || len(ups) != 0 {
		t.Errorf("unfinished uploads left: %v %v", ups, err)
	}
	if data, _, _ := s3Epoch(t, full, &source.OpenOptions{Store: fastS3}); !bytes.Equal(data, wantData) {
		t.Fatal("after converting again over a lost run, other batches")
	}
	// An orphan found after an upload without the flag is reported and left.
	srv.Put(t, "whole/00000000000000ff-00000000.shard", []byte("left by a lost run"))
	out, stderr, err = runConvert(t, append([]string{src, whole, "--staging", staging}, flags...)...)
	if err != nil || !strings.Contains(stderr, "--delete-orphans") || !strings.Contains(stderr, "00000000000000ff-00000000.shard") {
		t.Fatalf("rerun with an orphan: %v\n%s%s", err, out, stderr)
	}
	if !slices.Contains(shardFiles(t, b), "00000000000000ff-00000000.shard") {
		t.Fatal("the orphan was deleted without --delete-orphans")
	}
	if out, stderr, err = runConvert(t, append([]string{src, whole, "--staging", staging, "--delete-orphans"}, flags...)...); err != nil || !strings.Contains(out, "deleted=1 ") {
		t.Fatalf("rerun --delete-orphans: %v\n%s%s", err, out, stderr)
	}
	if data, _, _ := s3Epoch(t, whole, &source.OpenOptions{Store: fastS3}); !bytes.Equal(data, wantData) {
		t.Fatal("after deleting an orphan, other batches")
	}

	// Two parts at once, then through faults.
	parted := srv.URL("parted/")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	outs := make([]string, 2)
	for i := range 2 {
		wg.Go(func() {
			outs[i], _, errs[i] = runConvert(t, append([]string{src, parted, "--part", []string{"0/2", "1/2"}[i]}, flags...)...)
		})
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil {
			t.Fatalf("part %d/2: %v\n%s", i, errs[i], outs[i])
		}
	}
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "conveyor-convert-*")); len(left) != 0 {
		t.Errorf("default staging directories left behind: %v", left)
	}
	if data, labels, _ := s3Epoch(t, parted, &source.OpenOptions{Store: fastS3}); !bytes.Equal(data, wantData) || !slices.Equal(labels, wantLabels) {
		t.Fatal("the dataset converted in 2 parts into S3 trains to other batches than the local conversion")
	}
	p := s3test.NewProxy(t, srv.Endpoint, s3test.Faults{Latency: time.Millisecond, SlowDown: 3, Reset: 4, Truncate: 3})
	srv.Env(t, p.URL)
	data, _, st = s3Epoch(t, parted, &source.OpenOptions{Store: fastS3})
	if !bytes.Equal(data, wantData) || st.Retries == 0 {
		t.Fatalf("through faults: other batches, or no retry (%v, faults %v)", st, p.Counts())
	}
	srv.Env(t, "")
	var vout bytes.Buffer
	if err := verify([]string{parted}, &vout, io.Discard); err != nil || !strings.Contains(vout.String(), "records=") {
		t.Fatalf("verify %s: %v\n%s", parted, err, vout.String())
	}
	vout.Reset()
	if err := inspect([]string{parted}, &vout, io.Discard); err != nil || !strings.Contains(vout.String(), "parts         2, all complete") {
		t.Fatalf("inspect %s: %v\n%s", parted, err, vout.String())
	}

	if code, stdout, stderr := runCLI(t, "bench", parted, "--epochs", "1", "--batch", "4", "--workers", "2"); code != 0 || !strings.Contains(stdout, "bytes_fetched=") {
		t.Fatalf("bench %s: exit %d\n%s%s", parted, code, stdout, stderr)
	}

	// A part missing: only part 1/2 ran.
	half := srv.URL("half/")
	if out, _, err := runConvert(t, append([]string{src, half, "--part", "1/2"}, flags...)...); err != nil {
		t.Fatalf("part 1/2: %v\n%s", err, out)
	}
	vout.Reset()
	if err := verify([]string{half}, &vout, io.Discard); err == nil || !strings.Contains(err.Error(), "part 0/2 has not run") || !strings.HasPrefix(err.Error(), half) {
		t.Fatalf("verify with part 0/2 missing: %v\n%s", err, vout.String())
	}
	if _, err := source.Open(context.Background(), half, &source.OpenOptions{Store: fastS3}); err == nil || !strings.Contains(err.Error(), "part 0/2") || !strings.Contains(err.Error(), strings.TrimSuffix(half, "/")) || strings.Contains(err.Error(), "conveyor-converted-") {
		t.Fatalf("OpenDataset with part 0/2 missing: %v", err)
	}
	if _, err := os.Stat(filepath.Join(os.TempDir(), cache.InfoName)); err == nil {
		t.Error("a dataset.json in the temporary directory")
	}
}

// shardFiles lists the shard and index files under b.
func shardFiles(t *testing.T, b *objstore.Bucket) []string {
	t.Helper()
	objs, err := b.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		if strings.HasSuffix(o.Name, ".shard") || strings.HasSuffix(o.Name, ".idx") {
			names = append(names, o.Name)
		}
	}
	return names
}

// A converted dataset served by a plain web server (no listing) is read from its
// manifests: whole and in parts, the same batches as on local disk; verify takes the URL.
func TestConvertedHTTP(t *testing.T) {
	src, _ := badTree(t)
	flags := []string{"--size", "32", "--workers", "2"}
	local := filepath.Join(t.TempDir(), "local")
	if out, stderr, err := runConvert(t, append([]string{src, local}, flags...)...); err != nil {
		t.Fatalf("convert: %v\n%s%s", err, out, stderr)
	}
	parted := filepath.Join(t.TempDir(), "parted")
	for _, p := range []string{"0/2", "1/2"} {
		if out, stderr, err := runConvert(t, append([]string{src, parted, "--part", p}, flags...)...); err != nil {
			t.Fatalf("convert --part %s: %v\n%s%s", p, err, out, stderr)
		}
	}
	wantData, wantLabels, _ := s3Epoch(t, local, nil)
	for _, dir := range []string{local, parted} {
		hs := httptest.NewServer(http.FileServer(http.Dir(dir)))
		defer hs.Close()
		url := hs.URL + "/"
		data, labels, st := s3Epoch(t, url, &source.OpenOptions{Store: fastS3})
		if !bytes.Equal(data, wantData) || !slices.Equal(labels, wantLabels) || st.BytesFetched == 0 {
			t.Fatalf("%s over HTTP: other batches (%v)", dir, st)
		}
		var vout, verr bytes.Buffer
		if err := verify([]string{url}, &vout, &verr); err != nil || !strings.Contains(vout.String(), "records=24 ") || !strings.Contains(verr.String(), "shard cache: ") || strings.Contains(verr.String(), " 0 fetched") {
			t.Fatalf("verify %s: %v\n%s%s", url, err, vout.String(), verr.String())
		}
		// inspect fetches the indexes, not a shard; it names the URL and counts
		// the shards' bytes from the manifest.
		var iout, ierr bytes.Buffer
		if err := inspect([]string{url}, &iout, &ierr); err != nil || !strings.Contains(iout.String(), "samples       24 stored") ||
			!strings.Contains(iout.String(), "directory     "+hs.URL+"\n") || !strings.Contains(ierr.String(), " 0 fetched") {
			t.Fatalf("inspect %s: %v\n%s%s", url, err, iout.String(), ierr.String())
		}
		var got, want inspectResult
		iout.Reset()
		if err := inspect([]string{url, "--json"}, &iout, io.Discard); err != nil || json.Unmarshal(iout.Bytes(), &got) != nil {
			t.Fatalf("inspect %s --json: %v\n%s", url, err, iout.String())
		}
		iout.Reset()
		if err := inspect([]string{dir, "--json"}, &iout, io.Discard); err != nil || json.Unmarshal(iout.Bytes(), &want) != nil {
			t.Fatal(err)
		}
		if got.Bytes != want.Bytes || got.Samples != want.Samples || !slices.Equal(got.Classes, want.Classes) || got.Shards != want.Shards {
			t.Errorf("inspect %s: %d bytes, %d samples, %d shards, classes %v; the local copy %d, %d, %d, %v",
				url, got.Bytes, got.Samples, got.Shards, got.Classes, want.Bytes, want.Samples, want.Shards, want.Classes)
		}
	}
	// A record damaged in the store: verify reads every shard through the shard
	// cache, which, as training's, refuses a shard whose CRC-32C is not the manifest's,
	// and names the shard by its URL.
	shards, _ := filepath.Glob(filepath.Join(local, "*.shard"))
	if len(shards) == 0 {
		t.Fatal("no shards")
	}
	data, err := os.ReadFile(shards[0])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-10] ^= 0xff
	if err := os.WriteFile(shards[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	hsl := httptest.NewServer(http.FileServer(http.Dir(local)))
	defer hsl.Close()
	var vout bytes.Buffer
	if err := verify([]string{hsl.URL + "/"}, &vout, io.Discard); err == nil || !strings.Contains(vout.String(), "changed shard "+hsl.URL+"/"+filepath.Base(shards[0])+": ") || strings.Contains(vout.String(), "conveyor-converted-") {
		t.Fatalf("verify with a damaged record: %v\n%s", err, vout.String())
	}
	// Part 1/2 missing: named by OpenDataset.
	if err := os.Remove(filepath.Join(parted, cache.Part{Index: 1, Count: 2}.PartInfoName())); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(http.FileServer(http.Dir(parted)))
	defer hs.Close()
	if _, err := source.Open(context.Background(), hs.URL+"/", &source.OpenOptions{Store: fastS3}); !errors.Is(err, source.ErrIncomplete) || !strings.Contains(err.Error(), "part 1/2") || !strings.Contains(err.Error(), hs.URL) || strings.Contains(err.Error(), "conveyor-converted-") {
		t.Fatalf("OpenDataset over HTTP with part 1/2 missing: %v", err)
	}
}

// convert into a store that answers the listing of multipart uploads with 404
// NoSuchUpload (gofakes3, in a bucket without uploads) takes it as no uploads: each
// part converts, says so once, and with --delete-orphans still deletes an orphaned
// shard; the dataset reads back whole.
func TestConvertS3NoUploadList(t *testing.T) { s3test.Each(t, testConvertS3NoUploadList) }

func testConvertS3NoUploadList(t *testing.T, srv *s3test.Server) {
	p := s3test.NewProxy(t, srv.Endpoint, s3test.Faults{NoUploadList: true})
	srv.Env(t, p.URL)
	src, _ := badTree(t)
	flags := []string{"--size", "32", "--workers", "2", "--delete-orphans"}
	url := srv.URL("nolist/")
	srv.Put(t, "nolist/part-0-of-2-00000000000000ff-00000000.shard", []byte("left by a lost run"))
	const said = "does not list multipart uploads"
	for _, part := range []string{"0/2", "1/2"} {
		out, stderr, err := runConvert(t, append([]string{src, url, "--part", part}, flags...)...)
		if err != nil || strings.Count(stderr, said) != 1 || !strings.Contains(stderr, url) {
			t.Fatalf("convert --part %s: %v, want it said once that the store %s\n%s%s", part, err, said, out, stderr)
		}
		if part == "0/2" && !strings.Contains(out, "deleted=1 ") {
			t.Errorf("convert --part %s: the orphaned shard not deleted\n%s", part, out)
		}
	}
	if n := p.Counts()["nouploadlist"]; n < 2 {
		t.Errorf("%d listings of uploads answered 404, want one per part at least", n)
	}
	srv.Env(t, "")
	var vout bytes.Buffer
	if err := verify([]string{url}, &vout, io.Discard); err != nil || !strings.Contains(vout.String(), "records=") {
		t.Fatalf("verify %s: %v\n%s", url, err, vout.String())
	}
}
