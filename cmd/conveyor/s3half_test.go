package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/source"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/internal/s3test"
	"github.com/conveyor-ml/conveyor/objstore"
)

// A converted dataset whose upload stopped before dataset.json (shards, indexes and
// part records there) is called an unfinished conversion, naming what is there and how
// to resume, by OpenDataset, verify and inspect; it was "no WebDataset shards (.tar)".
func TestHalfUploadedConversion(t *testing.T) { s3test.Each(t, testHalfUploadedConversion) }

func testHalfUploadedConversion(t *testing.T, srv *s3test.Server) {
	srv.Env(t, "")
	t.Setenv("TMPDIR", t.TempDir())
	src, _ := badTree(t)
	for _, part := range []string{"", "0/2"} {
		prefix := "half-whole/"
		args := []string{src, srv.URL(prefix), "--size", "32", "--workers", "2"}
		if part != "" {
			prefix = "half-parted/"
			args = []string{src, srv.URL(prefix), "--size", "32", "--workers", "2", "--part", part}
		}
		url := srv.URL(prefix)
		if out, stderr, err := runConvert(t, args...); err != nil {
			t.Fatalf("convert: %v\n%s%s", err, out, stderr)
		}
		srv.Delete(t, prefix+cache.InfoName)
		_, err := source.Open(context.Background(), url, &source.OpenOptions{Store: fastS3})
		if !errors.Is(err, source.ErrIncomplete) || !strings.Contains(err.Error(), "upload did not finish") || !strings.Contains(err.Error(), url) || !strings.Contains(err.Error(), "no "+cache.InfoName) || strings.Contains(err.Error(), "WebDataset") {
			t.Errorf("OpenDataset of %s without %s: %v", url, cache.InfoName, err)
		}
		if part != "" && !strings.Contains(err.Error(), "dataset.part-0-of-2.json") {
			t.Errorf("OpenDataset of %s without %s: %v, want the part record named", url, cache.InfoName, err)
		}
		for name, cmd := range map[string]func([]string, io.Writer, io.Writer) error{"verify": verify, "inspect": inspect} {
			if err := cmd([]string{url}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "upload did not finish") {
				t.Errorf("%s %s without %s: %v", name, url, cache.InfoName, err)
			}
		}
	}
}

// verify of a converted dataset in S3 checks each shard against the identity its
// manifest recorded, as training does: a shard replaced in the store (same size, other
// bytes) is refused by its URL as changed, not read at the index's offsets.
func TestVerifyS3ChangedShard(t *testing.T) { s3test.Each(t, testVerifyS3ChangedShard) }

func testVerifyS3ChangedShard(t *testing.T, srv *s3test.Server) {
	srv.Env(t, "")
	t.Setenv("TMPDIR", t.TempDir())
	src, _ := badTree(t)
	url := srv.URL("changed/")
	if out, stderr, err := runConvert(t, src, url, "--size", "32", "--workers", "2"); err != nil {
		t.Fatalf("convert: %v\n%s%s", err, out, stderr)
	}
	b, err := objstore.OpenBucket(context.Background(), url, fastS3)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	shards := shardFiles(t, b)
	var shard string
	for _, n := range shards {
		if strings.HasSuffix(n, ".shard") {
			shard = n
		}
	}
	data := srv.Get(t, "changed/"+shard)
	data[len(data)-1] ^= 0xff
	srv.Put(t, "changed/"+shard, data)
	var out bytes.Buffer
	err = verify([]string{url}, &out, io.Discard)
	if err == nil || !strings.Contains(out.String(), "changed shard "+url+shard+": ") || !strings.Contains(out.String(), "changed since it was first fetched") {
		t.Fatalf("verify with a shard replaced in the store: %v, want it refused as changed by its URL\n%s", err, out.String())
	}
}
