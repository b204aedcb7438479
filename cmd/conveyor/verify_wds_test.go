package main

import (
	"archive/tar"
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/internal/s3test"
)

// damagedShard writes a WebDataset shard of six samples, four of them bad in different
// ways, and returns its bytes.
func damagedShard(t *testing.T) []byte {
	t.Helper()
	m := image.NewRGBA(image.Rect(0, 0, 48, 32))
	for i := range m.Pix {
		m.Pix[i] = uint8(i * 13)
	}
	m.Set(3, 3, color.White)
	var good bytes.Buffer
	if err := jpeg.Encode(&good, m, nil); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, data []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	add("a/good1.jpg", good.Bytes())
	add("a/good1.cls", []byte("0"))
	add("a/garbage.jpg", []byte("this is not an image at all"))
	add("a/garbage.cls", []byte("1"))
	add("a/noimage.cls", []byte("1"))
	add("a/badlabel.jpg", good.Bytes())
	add("a/badlabel.cls", []byte("one"))
	add("a/cut.jpg", good.Bytes()[:good.Len()/2])
	add("a/cut.cls", []byte("0"))
	add("a/good2.jpg", good.Bytes())
	add("a/good2.cls", []byte("1"))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// verify checks WebDataset shards sample by sample: every bad sample is listed with its
// shard and key, and the command fails naming the count; good shards pass.
func TestVerifyWebDataset(t *testing.T) {
	dir, shards := wdsShards(t, [][2]int{{0, 10}, {10, 18}})
	var out bytes.Buffer
	if err := verify([]string{filepath.Join(dir, "train-*.tar")}, &out, &out); err != nil {
		t.Fatalf("good shards: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "shards=2 samples=18 classes=2 bad=0") {
		t.Errorf("good shards: %s", out.String())
	}
	bad := filepath.Join(dir, "train-02.tar")
	if err := os.WriteFile(bad, damagedShard(t), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err := verify(append(shards, bad), &out, &out)
	checkDamaged(t, err, out.String(), bad)
}

// checkDamaged holds verify's report of damagedShard (named shard) to its four bad
// samples.
func checkDamaged(t *testing.T, err error, out, shard string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), "4 of ") {
		t.Errorf("error %v, want one counting 4 bad samples\n%s", err, out)
	}
	for _, key := range []string{"garbage", "noimage", "badlabel", "cut"} {
		found := false
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "bad ") && strings.Contains(line, shard) && strings.Contains(line, "a/"+key) {
				found = true
			}
		}
		if !found {
			t.Errorf("no line for sample a/%s of %s:\n%s", key, shard, out)
		}
	}
	for _, key := range []string{"good1", "good2"} {
		if strings.Contains(out, "a/"+key+":") {
			t.Errorf("good sample a/%s listed as bad:\n%s", key, out)
		}
	}
}

// verify reads WebDataset shards from a real S3 server by a brace URL.
func TestVerifyWebDatasetS3(t *testing.T) { s3test.Each(t, testVerifyWebDatasetS3) }

func testVerifyWebDatasetS3(t *testing.T, srv *s3test.Server) {
	_, shards := wdsShards(t, [][2]int{{0, 9}, {9, 18}})
	for _, name := range shards {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		srv.Put(t, "wds/"+filepath.Base(name), data)
	}
	srv.Put(t, "wds/train-02.tar", damagedShard(t))
	srv.Env(t, "")
	t.Setenv("CONVEYOR_SHARD_CACHE", t.TempDir())
	var out, errOut bytes.Buffer
	if err := verify([]string{srv.URL("wds/train-{00..01}.tar")}, &out, &errOut); err != nil {
		t.Fatalf("good shards: %v\n%s", err, out.String())
	}
	if !strings.Contains(errOut.String(), "requests") {
		t.Errorf("no object-store counters on stderr: %q", errOut.String())
	}
	out.Reset()
	err := verify([]string{srv.URL("wds/train-{00..02}.tar")}, &out, &errOut)
	checkDamaged(t, err, out.String(), srv.URL("wds/train-02.tar"))
	if err := verify([]string{srv.URL("wds/train-{00..03}.tar")}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "train-03.tar") {
		t.Errorf("a missing shard: %v, want an error naming it", err)
	}
}
