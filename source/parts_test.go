package source

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/internal/treetest"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// convertPart converts part p of src into dst, as one process of a conversion in parts
// would: its own cache, opened with the part's shard prefix.
func convertPart(t *testing.T, src pipeline.Source, dst string, p cache.Part) (*pipeline.ConvertReport, error) {
	c, err := cache.Open(dst, &cache.Options{ShardBytes: 64 << 10, ShardPrefix: p.ShardPrefix(), Logf: t.Logf})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	o := convertOpts(t)
	o.Part = p
	return pipeline.Convert(context.Background(), src, c, o)
}

// Three parts converted at once into one directory, with no merge step, give the
// dataset one conversion gives: the same samples in the same order, so a loader over it
// gives the same batches; each part wrote only files named after it.
func TestConvertPartsSameBatches(t *testing.T) {
	tree := treetest.Shared(t)
	src, err := Dir(tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	one := t.TempDir()
	c, err := cache.Open(one, &cache.Options{ShardBytes: 64 << 10, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pipeline.Convert(context.Background(), src, c, convertOpts(t)); err != nil {
		t.Fatal(err)
	}
	c.Close()

	parted := t.TempDir()
	const n = 3
	var wg sync.WaitGroup
	errs := make([]error, n)
	reps := make([]*pipeline.ConvertReport, n)
	for i := range n {
		wg.Go(func() {
			// Each opens its own listing, as a separate process does.
			src, err := Dir(tree, nil)
			if err == nil {
				reps[i], err = convertPart(t, src, parted, cache.Part{Index: i, Count: n})
			}
			errs[i] = err
		})
	}
	wg.Wait()
	total := 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
		lo, hi := cache.Part{Index: i, Count: n}.Range(src.Len())
		if reps[i].Total != hi-lo {
			t.Errorf("part %d listed %d files, want %d", i, reps[i].Total, hi-lo)
		}
		for _, e := range reps[i].BadFiles {
			if e.Index < lo || e.Index >= hi || src.Path(e.Index) != e.Path {
				t.Errorf("part %d: bad file %q at index %d, outside its range [%d, %d) or not that index's", i, e.Path, e.Index, lo, hi)
			}
		}
		total += reps[i].Stored + reps[i].Bad
	}
	if total != src.Len() {
		t.Fatalf("parts stored or found bad %d files, want %d", total, src.Len())
	}

	ents, err := os.ReadDir(parted)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		name := e.Name()
		if name != cache.InfoName && name != "LOCK" && !strings.HasPrefix(name, "part-") && !strings.HasPrefix(name, "dataset.part-") && !strings.HasPrefix(name, "convert.part-") && !strings.HasPrefix(name, ".") {
			t.Errorf("%s in a dataset converted in parts: not named after a part", name)
		}
	}
	info, err := cache.ReadInfo(parted)
	if err != nil {
		t.Fatal(err)
	}
	if info.Parts != n || info.Version != cache.InfoVersion || !info.Complete || info.Samples != src.Len() {
		t.Fatalf("assembled info: parts %d, version %d, complete %t, samples %d", info.Parts, info.Version, info.Complete, info.Samples)
	}
	for _, m := range info.Shards {
		if !strings.HasPrefix(m.Name, "part-") {
			t.Errorf("manifest lists %s, not a part's shard", m.Name)
		}
	}

	a, err := OpenConverted(one, &ConvertedOptions{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenConverted(parted, &ConvertedOptions{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.Len() != b.Len() || b.Info().Stored != a.Info().Stored || b.Info().Bad != a.Info().Bad {
		t.Fatalf("parts hold %d samples (%d stored, %d bad), one conversion %d (%d, %d)", b.Len(), b.Info().Stored, b.Info().Bad, a.Len(), a.Info().Stored, a.Info().Bad)
	}
	for i := range a.Len() {
		if a.Path(i) != b.Path(i) || a.Label(i) != b.Label(i) {
			t.Fatalf("sample %d: %s (%d) in parts, %s (%d) in one", i, b.Path(i), b.Label(i), a.Path(i), a.Label(i))
		}
	}
	la, lb := newLoader(t, a, testConfig(2)), newLoader(t, b, testConfig(3))
	for e := range 2 {
		want, got := collect(t, la, context.Background(), e, 0), collect(t, lb, context.Background(), e, 0)
		if !bytes.Equal(got.data, want.data) || !slices.Equal(got.labels, want.labels) || !slices.Equal(got.indices, want.indices) {
			t.Fatalf("epoch %d: batches from the parts differ from one conversion's", e)
		}
	}
}

// A dataset with a part missing is refused naming it, or opened with what the finished
// parts hold; rerunning a finished part skips everything; running the missing part
// makes it complete, with no merge step.
func TestConvertPartsMissingAndResume(t *testing.T) {
	tree := treetest.New(t, 2, 9)
	src, err := Dir(tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	const n = 3
	for _, i := range []int{0, 2} {
		if _, err := convertPart(t, src, dst, cache.Part{Index: i, Count: n}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = OpenConverted(dst, &ConvertedOptions{Logf: t.Logf})
	if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), "part 1/3 has not run") || !strings.Contains(err.Error(), "--part 1/3") {
		t.Fatalf("OpenConverted with part 1/3 missing: %v; want ErrIncomplete naming it", err)
	}
	info, err := cache.ReadInfo(dst)
	if err != nil || !slices.Equal(info.Unfinished, []string{"1/3"}) {
		t.Fatalf("ReadInfo: unfinished %v, %v; want [1/3]", info.Unfinished, err)
	}
	some, err := OpenConverted(dst, &ConvertedOptions{AllowIncomplete: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := cache.Part{Index: 1, Count: n}.Range(src.Len())
	if some.Len() != info.Stored || some.Len() > src.Len()-(hi-lo) {
		t.Errorf("AllowIncomplete: %d samples, %d recorded stored; want the other parts' (at most %d)", some.Len(), info.Stored, src.Len()-(hi-lo))
	}
	some.Close()

	rep, err := convertPart(t, src, dst, cache.Part{Index: 0, Count: n})
	if err != nil {
		t.Fatal(err)
	}
	lo0, hi0 := cache.Part{Index: 0, Count: n}.Range(src.Len())
	if rep.Stored != 0 || rep.Skipped+rep.Bad != hi0-lo0 {
		t.Errorf("rerun of part 0/3: stored %d, skipped %d, bad %d; want 0 stored, %d skipped or bad", rep.Stored, rep.Skipped, rep.Bad, hi0-lo0)
	}

	if _, err := convertPart(t, src, dst, cache.Part{Index: 1, Count: n}); err != nil {
		t.Fatal(err)
	}
	all, err := OpenConverted(dst, &ConvertedOptions{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	if got := all.Info(); !got.Complete || got.Stored+got.Bad != src.Len() || all.Len() != got.Stored {
		t.Fatalf("all parts done: complete %t, %d stored + %d bad of %d, %d samples", got.Complete, got.Stored, got.Bad, src.Len(), all.Len())
	}
}

// renamedFirst is a FileSource whose first file has another name: as many files in the
// same classes, not the same listing.
type renamedFirst struct{ pipeline.FileSource }

func (r renamedFirst) Path(i int) string {
	if i == 0 {
		return "renamed-" + r.FileSource.Path(i)
	}
	return r.FileSource.Path(i)
}

// Parts that disagree about the conversion, or a conversion in one process into a
// directory converted in parts (and the reverse), are refused naming what differs.
func TestConvertPartsMismatch(t *testing.T) {
	src, err := Dir(treetest.New(t, 2, 3), nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if _, err := convertPart(t, src, dst, cache.Part{Index: 0, Count: 2}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"other count", func() error { _, err := convertPart(t, src, dst, cache.Part{Index: 1, Count: 3}); return err }, "converted in 2 parts, not 3"},
		{"one process", func() error {
			c, err := cache.Open(dst, &cache.Options{Logf: t.Logf})
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = pipeline.Convert(context.Background(), src, c, convertOpts(t))
			return err
		}, "converted in 2 parts"},
		{"wrong prefix", func() error {
			c, err := cache.Open(dst, &cache.Options{Logf: t.Logf})
			if err != nil {
				return err
			}
			defer c.Close()
			o := convertOpts(t)
			o.Part = cache.Part{Index: 1, Count: 2}
			_, err = pipeline.Convert(context.Background(), src, c, o)
			return err
		}, `ShardPrefix "part-1-of-2-"`},
		{"more parts than samples", func() error {
			_, err := convertPart(t, src, t.TempDir(), cache.Part{Index: 0, Count: 7})
			return err
		}, "fewer than 7 parts"},
		{"other files", func() error {
			_, err := convertPart(t, renamedFirst{src}, dst, cache.Part{Index: 1, Count: 2})
			return err
		}, "listed other files"},
		{"invalid part", func() error { _, err := convertPart(t, src, t.TempDir(), cache.Part{Index: 2, Count: 2}); return err }, "part 2/2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.run(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}

	whole := t.TempDir()
	c, err := cache.Open(whole, &cache.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	_, err = pipeline.Convert(context.Background(), src, c, convertOpts(t))
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := convertPart(t, src, whole, cache.Part{Index: 0, Count: 2}); err == nil || !strings.Contains(err.Error(), "converted in one process") {
		t.Fatalf("a part into a dataset converted in one process: %v", err)
	}
	if info, err := cache.ReadInfo(whole); err != nil || info.Version != cache.WholeInfoVersion {
		t.Fatalf("a conversion in one process wrote version %d (%v), want %d", info.Version, err, cache.WholeInfoVersion)
	}
}

// A damaged shard of one part is named when the dataset opens, and its samples are bad
// samples rather than missing ones.
func TestConvertPartsDamagedShard(t *testing.T) {
	src, err := Dir(treetest.New(t, 2, 6), nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	for i := range 2 {
		if _, err := convertPart(t, src, dst, cache.Part{Index: i, Count: 2}); err != nil {
			t.Fatal(err)
		}
	}
	shards, _ := filepath.Glob(filepath.Join(dst, "part-1-of-2-*.shard"))
	if len(shards) == 0 {
		t.Fatal("part 1/2 wrote no shard")
	}
	f, err := os.OpenFile(shards[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff, 0xff, 0xff, 0xff}, 4); err != nil { // the header
		t.Fatal(err)
	}
	f.Close()
	var l lines
	conv, err := OpenConverted(dst, &ConvertedOptions{Logf: l.logf})
	if err != nil {
		t.Fatal(err)
	}
	defer conv.Close()
	if len(l.with(filepath.Base(shards[0]))) == 0 || len(conv.Problems()) == 0 {
		t.Fatalf("opening named no damaged shard %s: %q", filepath.Base(shards[0]), l.l)
	}
}

// A part that stopped (its cache refused more records, as on a full disk) is named with
// why; run again, it resumes, keeping what it stored, and the dataset opens.
func TestConvertPartStopped(t *testing.T) {
	src, err := Dir(treetest.New(t, 2, 20), nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	p := cache.Part{Index: 1, Count: 2}
	c, err := cache.Open(dst, &cache.Options{MaxBytes: 40 << 10, ShardPrefix: p.ShardPrefix(), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	o := convertOpts(t)
	o.Part = p
	first, err := pipeline.Convert(context.Background(), src, c, o)
	c.Close()
	if !errors.Is(err, cache.ErrFull) || first.Stored == 0 {
		t.Fatalf("part 1/2 into a small cache: %v, %+v; want ErrFull after some were stored", err, first)
	}
	if _, err := convertPart(t, src, dst, cache.Part{Index: 0, Count: 2}); err != nil {
		t.Fatal(err)
	}
	_, err = OpenConverted(dst, &ConvertedOptions{Logf: t.Logf})
	if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), "part 1/2 stopped with ") || !strings.Contains(err.Error(), "full") {
		t.Fatalf("open with part 1/2 stopped: %v", err)
	}
	rep, err := convertPart(t, src, dst, p)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Skipped != first.Stored {
		t.Errorf("part 1/2 resumed skipping %d, want the %d it stored before", rep.Skipped, first.Stored)
	}
	conv, err := OpenConverted(dst, &ConvertedOptions{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer conv.Close()
	if got := conv.Info(); !got.Complete || got.Stored+got.Bad != src.Len() {
		t.Fatalf("after the resumed part: complete %t, %d stored + %d bad of %d", got.Complete, got.Stored, got.Bad, src.Len())
	}
}
