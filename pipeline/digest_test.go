package pipeline

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/treetest"
	"github.com/conveyor-ml/conveyor/pack"
)

var updateDigests = flag.Bool("update-digests", false, "record the batch digests of TestBatchDigests in testdata/digests.golden")

const digestFile = "testdata/digests.golden"

// TestBatchDigests pins the batches themselves: for a set of configurations that covers
// every path a sample can take (crop-aware and full decode, eval resize, uint8 and float16,
// conversion after batching, replacements of bad files, cache fill and cache reads, a
// converted dataset, a distributed shard), the SHA-256 of the first epochs' pixels, labels
// and indices must equal what was recorded, per JPEG backend. A change to the engine that
// is meant to keep behaviour must keep every digest; one that changes pixels on purpose
// re-records them with -update-digests and says why in its commit.
func TestBatchDigests(t *testing.T) {
	golden := readDigests(t)
	got := map[string]string{}
	ctx := context.Background()
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	backend := ""
	run := func(name string, src Source, cfg *Config, epochs ...int) {
		t.Helper()
		ld, err := New(src, cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer ld.Close()
		if backend == "" {
			backend = ld.Stats().Backends.Decode
		}
		h := sha256.New()
		for _, e := range epochs {
			d := collect(t, ld, ctx, e, 0)
			h.Write(d.data)
			binary.Write(h, binary.LittleEndian, d.labels)
			binary.Write(h, binary.LittleEndian, d.indices)
			binary.Write(h, binary.LittleEndian, int64(d.batches))
		}
		fmt.Fprintf(h, "bad=%d", ld.Stats().Bad.Draws) // every failed draw, as BadSamples counted when recorded
		got[name] = hex.EncodeToString(h.Sum(nil))
	}

	run("train", src, testConfig(2), 0, 1)

	full := testConfig(3)
	full.FullDecode = true
	run("train-full-decode", src, full, 0)

	eval := testConfig(2)
	if err := ApplyRecipe(eval, "eval", 24); err != nil {
		t.Fatal(err)
	}
	eval.Order.Sequential = true
	eval.Pack = pack.Options{Width: 24, Height: 24, DType: pack.Uint8, Layout: pack.NHWC}
	run("eval-uint8-nhwc", src, eval, 0)

	conv := testConfig(2)
	conv.Pack.DType = pack.Float16
	conv.Device.Cast = true
	run("device-convert-float16", src, conv, 0)

	shard := testConfig(1)
	shard.Order.Rank, shard.Order.World, shard.Batch.DropLast = 1, 3, true
	run("rank1-of-3", src, shard, 2)

	damaged := treetest.New(t, 2, 12)
	treetest.Corrupt(t, damaged)
	dsrc, err := Dir(damaged)
	if err != nil {
		t.Fatal(err)
	}
	skip := testConfig(2)
	skip.Bad.MaxFraction = -1
	run("skip-bad-files", dsrc, skip, 0, 1)

	cached := testConfig(2)
	cached.SampleCache = openCache(t, t.TempDir(), cache.S2)
	cached.SampleCacheFill = 1
	run("cache-fill-then-read", src, cached, 0, 1)

	dst := t.TempDir()
	c := openCache(t, dst, cache.S2)
	opts := &ConvertOptions{Decode: decode.Options{Resize: decode.ResizePolicy{Mode: decode.ResizeShorter, Size: 32}}, Workers: 2, Logf: t.Logf}
	rep, err := Convert(ctx, src, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	run("converted", storedOf(c, rep.Spec, src.Classes()), testConfig(2), 0)

	if *updateDigests {
		for name, d := range got {
			golden[backend+" "+name] = d
		}
		writeDigests(t, golden)
		return
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		want, ok := golden[backend+" "+name]
		if !ok {
			t.Errorf("%s on the %s backend: no recorded digest (go test ./pipeline -run TestBatchDigests -update-digests)", name, backend)
			continue
		}
		if got[name] != want {
			t.Errorf("%s on the %s backend: batches changed: digest %s, recorded %s", name, backend, got[name], want)
		}
	}
}

func readDigests(t *testing.T) map[string]string {
	m := map[string]string{}
	f, err := os.Open(digestFile)
	if os.IsNotExist(err) {
		return m
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 3 {
			t.Fatalf("%s: bad line %q", digestFile, line)
		}
		m[fs[0]+" "+fs[1]] = fs[2]
	}
	return m
}

func writeDigests(t *testing.T, m map[string]string) {
	var b strings.Builder
	b.WriteString("# backend configuration sha256 — written by go test ./pipeline -run TestBatchDigests -update-digests\n")
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s %s\n", k, m[k])
	}
	if err := os.MkdirAll(filepath.Dir(digestFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(digestFile, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
