package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/internal/synth"
	"github.com/conveyor-ml/conveyor/source"
)

// datasetForms writes one small dataset in every form the commands read: an ImageFolder
// tree, a CSV and a JSONL manifest of it (beside the tree), a folder of its WebDataset
// shards and its conversion. It returns them by name.
func datasetForms(t *testing.T) map[string]string {
	t.Helper()
	tree := smallTree(t, 5)
	src, err := source.Dir(tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	var csv, jsonl strings.Builder
	for i := range src.Len() {
		fmt.Fprintf(&csv, "%s,%s\n", src.Path(i), src.Classes()[src.Label(i)])
		fmt.Fprintf(&jsonl, "{\"path\": %q, \"label\": %q}\n", src.Path(i), src.Classes()[src.Label(i)])
	}
	forms := map[string]string{
		"tree":   tree,
		"csv":    filepath.Join(tree, "train.csv"),
		"jsonl":  filepath.Join(tree, "train.jsonl"),
		"shards": t.TempDir(),
		"conv":   filepath.Join(t.TempDir(), "conv"),
	}
	for name, text := range map[string]string{"csv": csv.String(), "jsonl": jsonl.String()} {
		if err := os.WriteFile(forms[name], []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for k, r := range [][2]int{{0, 6}, {6, 10}} {
		f, err := os.Create(filepath.Join(forms["shards"], fmt.Sprintf("train-%02d.tar", k)))
		if err != nil {
			t.Fatal(err)
		}
		if err := source.WriteWebDataset(f, src, r[0], r[1]); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if out, stderr, err := runConvert(t, tree, forms["conv"], "--size", "32", "--workers", "2"); err != nil {
		t.Fatalf("convert: %v\n%s%s", err, out, stderr)
	}
	return forms
}

// bench, inspect and verify read a folder of shards, a manifest, an ImageFolder tree and
// a converted dataset alike: what source.Open reads.
func TestCommandsReadEveryForm(t *testing.T) {
	forms := datasetForms(t)
	for _, name := range []string{"tree", "csv", "jsonl", "shards", "conv"} {
		arg := forms[name]
		r := benchJSON(t, arg, "--workers", "1", "--epochs", "1")
		if r.Samples != 10 || r.Classes != 2 {
			t.Errorf("bench %s: %d samples in %d classes, want 10 in 2", name, r.Samples, r.Classes)
		}
		code, stdout, stderr := runCLI(t, "inspect", arg)
		if code != 0 || !strings.Contains(stdout, "10") {
			t.Errorf("inspect %s: exit %d\n%s%s", name, code, stdout, stderr)
		}
		code, stdout, stderr = runCLI(t, "verify", arg)
		if code != 0 || !strings.Contains(stdout, "conveyor verify ") || !strings.Contains(stdout, "=10 ") {
			t.Errorf("verify %s: exit %d\n%s%s", name, code, stdout, stderr)
		}
	}
	_, stdout, _ := runCLI(t, "inspect", forms["shards"])
	if !strings.Contains(stdout, "shards         2: train-00.tar ... train-01.tar") {
		t.Errorf("inspect of a shard folder:\n%s", stdout)
	}
	_, stdout, _ = runCLI(t, "inspect", forms["csv"])
	for _, want := range []string{"samples       10", "classes       2 (5 samples each): class00 (5), class01 (5)", "formats       "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("inspect of a manifest: no %q in\n%s", want, stdout)
		}
	}
}

// verify on an ImageFolder tree or a manifest decodes every file and lists the bad ones,
// path and reason, with a summary line, and exits 1.
func TestVerifyImageFolder(t *testing.T) {
	tree, bad := badTree(t)
	man := filepath.Join(tree, "m.csv")
	if err := os.WriteFile(man, []byte("class00/img-0000.jpg,a\nclass01/corrupt.jpg,b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "verify", tree)
	if code != 1 {
		t.Fatalf("verify: exit %d, want 1\n%s%s", code, stdout, stderr)
	}
	for _, b := range bad {
		if !strings.Contains(stdout, "bad "+b+": ") {
			t.Errorf("no line naming %s in\n%s", b, stdout)
		}
	}
	if n := strings.Count(stdout, "bad "); n != 2 {
		t.Errorf("%d bad lines, want 2:\n%s", n, stdout)
	}
	if !strings.Contains(stdout, "conveyor verify files=26 classes=3 bad=2\n") {
		t.Errorf("no summary line in\n%s", stdout)
	}
	if want := "conveyor verify: 2 of 26 files are bad in " + tree + ": " + bad[0] + ", " + bad[1] + "\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}

	files, err := filepath.Glob(filepath.Join(tree, "class00", "*.jpg"))
	if err != nil || len(files) == 0 {
		t.Fatal(files, err)
	}
	if err := os.WriteFile(man, []byte("class00/"+filepath.Base(files[0])+",a\nclass01/corrupt.jpg,b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runCLI(t, "verify", man)
	if code != 1 || !strings.HasPrefix(stdout, "bad "+bad[0]+": ") || !strings.HasSuffix(stdout, "\nconveyor verify files=2 classes=2 bad=1\n") || strings.Count(stdout, "\n") != 2 {
		t.Errorf("verify of a manifest: exit %d\n%s%s", code, stdout, stderr)
	}
}

// An empty class folder's error names --allow-empty-classes, not a Go field, on every
// command that lists folders; with the flag they read the tree.
func TestAllowEmptyClassesFlag(t *testing.T) {
	tree := smallTree(t, 3)
	if err := os.Mkdir(filepath.Join(tree, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	for _, args := range [][]string{
		{"bench", tree, "--epochs", "1", "--size", "32"},
		{"convert", tree, out, "--size", "32"},
		{"inspect", tree},
		{"verify", tree},
		{"show", tree, "--out", filepath.Join(t.TempDir(), "s.png"), "--n", "2", "--size", "32"},
	} {
		code, stdout, stderr := runCLI(t, args...)
		if code != 1 || !strings.Contains(stderr, `class folder "empty" holds no image files`) || !strings.Contains(stderr, "pass --allow-empty-classes") || strings.Contains(stderr, "FolderOptions") {
			t.Errorf("%q: exit %d, stderr %q", args, code, stderr)
		}
		code, stdout, stderr = runCLI(t, append(args, "--allow-empty-classes")...)
		if code != 0 {
			t.Errorf("%q --allow-empty-classes: exit %d\n%s%s", args, code, stdout, stderr)
		}
	}
}

// convert into a dataset of another spec refuses unless --replace, which deletes the
// old dataset's files and converts anew.
func TestConvertReplace(t *testing.T) {
	tree := smallTree(t, 4)
	dst := filepath.Join(t.TempDir(), "dst")
	if _, stderr, err := runConvert(t, tree, dst, "--size", "32"); err != nil {
		t.Fatalf("convert: %v\n%s", err, stderr)
	}
	before, err := cache.ReadInfo(dst)
	if err != nil {
		t.Fatal(err)
	}
	shards := func() []string {
		m, _ := filepath.Glob(filepath.Join(dst, "*.shard"))
		return m
	}
	old := shards()
	for _, args := range [][]string{{"--size", "48"}, {"--size", "32", "--codec", "zstd"}} {
		_, _, err := runConvert(t, append([]string{tree, dst}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "--replace") || !strings.Contains(err.Error(), before.Spec) {
			t.Errorf("convert %q over another spec: error %v, want one naming the spec and --replace", args, err)
		}
	}
	if after, err := cache.ReadInfo(dst); err != nil || after.Spec != before.Spec || !slices.Equal(shards(), old) {
		t.Fatalf("a refused convert changed the dataset: %v, %v, shards %q", after, err, shards())
	}
	// Files that are not the dataset's stay, whatever their names: another tool's
	// index (DALI names its WebDataset indexes .idx), an old report, notes.
	foreign := []string{"train-000.idx", "convert-report-old.txt", "notes.txt"}
	for _, n := range foreign {
		if err := os.WriteFile(filepath.Join(dst, n), []byte("not conveyor's"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, stderr, err := runConvert(t, tree, dst, "--size", "48", "--replace")
	if err != nil || !strings.Contains(stderr, "--replace: deleted") {
		t.Fatalf("convert --replace: %v\n%s", err, stderr)
	}
	for _, n := range foreign {
		if _, err := os.Stat(filepath.Join(dst, n)); err != nil {
			t.Errorf("--replace deleted %s, which is not the dataset's: %v", n, err)
		}
		os.Remove(filepath.Join(dst, n)) // verify, below, would call the .idx an orphan
	}
	after, err := cache.ReadInfo(dst)
	if err != nil || after.Spec == before.Spec || !after.Complete || after.Stored != 8 {
		t.Fatalf("after --replace: %+v, %v", after, err)
	}
	c, err := cache.Open(dst, &cache.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if specs := c.Specs(); len(specs) != 1 || specs[after.Spec] != 8 {
		t.Errorf("specs after --replace: %v, want only %q", specs, after.Spec)
	}
	if code, stdout, stderr := runCLI(t, "verify", dst); code != 0 || !strings.Contains(stdout, " orphans=0\n") {
		t.Errorf("verify after --replace: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, _, err := runConvert(t, tree, "s3://bucket/x", "--replace"); err == nil || !strings.Contains(err.Error(), "--replace is for a local DST") {
		t.Errorf("--replace on s3: %v", err)
	}
}

// inspect --prune deletes the shards of other specs than the dataset's, saying which,
// and leaves the dataset whole.
func TestInspectPrune(t *testing.T) {
	tree := smallTree(t, 4)
	dst, other := filepath.Join(t.TempDir(), "dst"), filepath.Join(t.TempDir(), "other")
	for _, c := range []struct{ dir, size string }{{dst, "32"}, {other, "48"}} {
		if _, stderr, err := runConvert(t, tree, c.dir, "--size", c.size); err != nil {
			t.Fatalf("convert: %v\n%s", err, stderr)
		}
	}
	// What a conversion with other flags left in dst: another spec's shards.
	moved, _ := filepath.Glob(filepath.Join(other, "*.shard"))
	idx, _ := filepath.Glob(filepath.Join(other, "*.idx"))
	for _, f := range append(moved, idx...) {
		if err := os.Rename(f, filepath.Join(dst, "old-"+filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
	}
	_, stdout, _ := runCLI(t, "inspect", dst)
	if !strings.Contains(stdout, "other specs (not part of the dataset; conveyor inspect "+dst+" --prune deletes them):") {
		t.Fatalf("inspect shows no other spec, or not how to prune it:\n%s", stdout)
	}
	code, stdout, stderr := runCLI(t, "inspect", dst, "--prune")
	if code != 0 || strings.Count(stdout, "deleted ") != len(moved) || !strings.Contains(stdout, "pruned "+plural(len(moved), "shard")+" (") {
		t.Fatalf("inspect --prune: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, f := range append(moved, idx...) {
		if _, err := os.Stat(filepath.Join(dst, "old-"+filepath.Base(f))); err == nil {
			t.Errorf("%s left", f)
		}
	}
	_, stdout, _ = runCLI(t, "inspect", dst)
	if strings.Contains(stdout, "other specs") {
		t.Errorf("other specs left after --prune:\n%s", stdout)
	}
	if code, stdout, stderr := runCLI(t, "verify", dst); code != 0 || !strings.Contains(stdout, "records=8 ") {
		t.Errorf("verify after --prune: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, _ := runCLI(t, "inspect", dst, "--prune"); code != 0 || !strings.Contains(stdout, "nothing to prune") {
		t.Errorf("second --prune: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := runCLI(t, "inspect", tree, "--prune"); code != 2 || !strings.Contains(stderr, "--prune applies to a converted dataset") {
		t.Errorf("--prune of a tree: exit %d, %s", code, stderr)
	}
}

// bench reads a folder of shards lazily with the shard index inspect --json wrote of
// it; --shard-index with a source that is not shards is a usage error.
func TestBenchShardFolderIndex(t *testing.T) {
	forms := datasetForms(t)
	code, stdout, stderr := runCLI(t, "inspect", forms["shards"], "--json")
	if code != 0 {
		t.Fatalf("inspect --json: exit %d\n%s", code, stderr)
	}
	index := filepath.Join(t.TempDir(), "index.json")
	if err := os.WriteFile(index, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := benchJSON(t, forms["shards"], "--epochs", "1", "--workers", "1", "--shard-index", index); r.Samples != 10 || r.Classes != 2 {
		t.Errorf("bench with --shard-index: %d samples in %d classes", r.Samples, r.Classes)
	}
	if code, _, stderr := runCLI(t, "bench", forms["tree"], "--shard-index", index); code != 2 || !strings.Contains(stderr, "--shard-index applies to WebDataset shards") {
		t.Errorf("--shard-index with a tree: exit %d, %s", code, stderr)
	}
}

// A loader's sample cache and a converted dataset are not each other: convert refuses a
// DST holding a loader's cache (which --replace or --prune would then delete), and bench
// refuses --cache naming a converted dataset (whose folder it would fill with records).
func TestCacheAndDatasetKeptApart(t *testing.T) {
	tree := t.TempDir()
	if _, err := synth.WriteTree(tree, &synth.TreeOptions{Classes: 2, PerClass: 4, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	lc := filepath.Join(t.TempDir(), "lc")
	if code, _, stderr := runCLI(t, "bench", tree, "--cache", lc, "--cache-fill", "1", "--epochs", "1", "--batch", "4", "--size", "32"); code != 0 {
		t.Fatalf("bench --cache: exit %d\n%s", code, stderr)
	}
	_, _, err := runConvert(t, tree, lc, "--size", "32")
	if err == nil || !strings.Contains(err.Error(), "loader's sample cache") {
		t.Errorf("convert into a loader's cache: %v", err)
	}
	dst := filepath.Join(t.TempDir(), "dst")
	if _, stderr, err := runConvert(t, tree, dst, "--size", "32"); err != nil {
		t.Fatalf("convert: %v\n%s", err, stderr)
	}
	if code, _, stderr := runCLI(t, "bench", tree, "--cache", dst, "--epochs", "1", "--batch", "4", "--size", "32"); code == 0 || !strings.Contains(stderr, "is a converted dataset") {
		t.Errorf("bench --cache on a converted dataset: exit %d\n%s", code, stderr)
	}
}
