package augment

import (
	"github.com/conveyor-ml/conveyor/pack"
	"image"
	"strings"
	"sync"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
)

// trainPipeline is a heavy ImageNet-style training pipeline: every op of the package that
// runs per sample in training.
func trainPipeline() Pipeline {
	return Pipeline{
		NewRandomResizedCrop(224, 224),
		NewRandomHorizontalFlip(0.5),
		NewColorJitter(0.4, 0.4, 0.4, 0.1),
		NewRandomGrayscale(0.2),
	}
}

// run applies p to a copy of src with a Context seeded by (seed, epoch, index) and packs
// the result.
func run(t testing.TB, c *Context, p Pipeline, pk *pack.Packer, src *decode.Image, seed, epoch uint64, index int64) []byte {
	c.Seed(seed, epoch, index)
	out, err := p.Apply(c, clone(src))
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, pk.SampleBytes())
	if err := pk.Pack(dst, out); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestDeterminism(t *testing.T) {
	src := photo(t, 5, 200, 150)
	p := trainPipeline()
	p[0] = NewRandomResizedCrop(64, 48)
	pk, err := pack.NewPacker(&pack.Options{Width: 64, Height: 48, DType: pack.BFloat16, Normalize: true})
	if err != nil {
		t.Fatal(err)
	}
	c1, c2 := NewContext(), NewContext()
	distinct := map[string]bool{}
	for i := range int64(20) {
		a := run(t, c1, p, pk, src, 9, 2, i)
		// A Context that has seen other samples in between gives the same bytes.
		run(t, c2, p, pk, src, 1, 1, 1000+i)
		if b := run(t, c2, p, pk, src, 9, 2, i); string(a) != string(b) {
			t.Fatalf("sample %d differs between Contexts", i)
		}
		distinct[string(a)] = true
	}
	if len(distinct) < 19 {
		t.Errorf("only %d distinct outputs from 20 seeds", len(distinct))
	}
	if string(run(t, c1, p, pk, src, 9, 2, 0)) == string(run(t, c1, p, pk, src, 9, 3, 0)) {
		t.Error("epochs 2 and 3 give the same sample")
	}
}

// TestConcurrentUse runs one Pipeline and one Packer from several goroutines, each with its
// own Context, and compares with a serial run (and lets -race look at it).
func TestConcurrentUse(t *testing.T) {
	src := photo(t, 6, 160, 120)
	p := trainPipeline()
	p[0] = NewRandomResizedCrop(32, 32)
	pk, err := pack.NewPacker(&pack.Options{Width: 32, Height: 32, Normalize: true})
	if err != nil {
		t.Fatal(err)
	}
	const n = 24
	want := make([][]byte, n)
	c := NewContext()
	for i := range want {
		want[i] = run(t, c, p, pk, src, 3, 0, int64(i))
	}
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := NewContext()
			for i := g; i < n; i += 3 {
				if got := run(t, c, p, pk, src, 3, 0, int64(i)); string(got) != string(want[i]) {
					t.Errorf("goroutine %d: sample %d differs", g, i)
				}
			}
		}()
	}
	wg.Wait()
}

// TestZeroAllocs guards the per-sample cost: after warm-up, ops and Pack allocate nothing.
// Resampling is decode.Resizer's business; the test allows RandomResizedCrop exactly the
// allocations one Resize call makes (none once decode's kernel keeps its tables).
func TestZeroAllocs(t *testing.T) {
	src := photo(t, 7, 300, 200)
	work := clone(src)
	pk, err := pack.NewPacker(&pack.Options{Width: 112, Height: 112, Normalize: true})
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, pk.SampleBytes())
	train := trainPipeline()
	train[0] = NewRandomResizedCrop(112, 112)

	var z decode.Resizer
	var out decode.Image
	resize := func() {
		if _, err := z.Resize(&out, src, image.Rect(0, 0, 300, 200), 112, 112); err != nil {
			t.Fatal(err)
		}
	}
	resize()
	resizeAllocs := testing.AllocsPerRun(5, resize)
	if resizeAllocs > 0 {
		t.Logf("decode.Resizer makes %v allocations per call", resizeAllocs)
	}

	for _, tt := range []struct {
		name  string
		p     Pipeline
		allow float64
	}{
		{"train", train, resizeAllocs},
		{"eval", Pipeline{NewCenterCrop(112, 112), NewRandomVerticalFlip(0.5), NewColorJitter(0.2, 0.2, 0.2, 0.2)}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := NewContext()
			i := int64(0)
			sample := func() {
				i++
				c.Seed(1, 0, i)
				copy(work.Pix, src.Pix) // in-place ops must not see earlier samples
				img, err := tt.p.Apply(c, work)
				if err != nil {
					t.Fatal(err)
				}
				if err := pk.Pack(dst, img); err != nil {
					t.Fatal(err)
				}
			}
			// Warm up: the largest crop is the whole image.
			if _, err := c.Resizer.Resize(c.Next(work), work, image.Rect(0, 0, 300, 200), 112, 112); err != nil {
				t.Fatal(err)
			}
			for range 10 {
				sample()
			}
			if n := testing.AllocsPerRun(20, sample); n > tt.allow {
				t.Errorf("%v allocations per sample, want ≤ %v", n, tt.allow)
			}
		})
	}
}

func TestStrings(t *testing.T) {
	pk, err := pack.NewPacker(&pack.Options{Width: 224, Height: 224, Normalize: true, DType: pack.Float16, Layout: pack.NHWC})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		s    interface{ String() string }
		want string
	}{
		{NewRandomResizedCrop(224, 224), "RandomResizedCrop(224x224, scale=(0.08, 1), ratio=(0.75, 1.333))"},
		{NewResize(256), "Resize(256)"},
		{NewResizeTo(32, 24), "Resize(32x24)"},
		{NewCenterCrop(224, 200), "CenterCrop(224x200)"},
		{NewRandomHorizontalFlip(0.5), "RandomHorizontalFlip(p=0.5)"},
		{NewRandomVerticalFlip(0.25), "RandomVerticalFlip(p=0.25)"},
		{NewColorJitter(0.4, 0.3, 0.2, 0.1), "ColorJitter(brightness=0.4, contrast=0.3, saturation=0.2, hue=0.1)"},
		{NewRandomGrayscale(0.1), "RandomGrayscale(p=0.1)"},
		{Pipeline{NewResize(256), NewCenterCrop(224, 224)}, "[Resize(256), CenterCrop(224x224)]"},
		{pk, "Packer(224x224 NHWC float16 normalize mean=[0.485 0.456 0.406] std=[0.229 0.224 0.225])"},
	} {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
	if s := (&RandomResizedCrop{Width: 1, Height: 1, Scale: [2]float64{0.5, 1}}).String(); !strings.Contains(s, "scale=(0.5, 1)") {
		t.Errorf("String() = %q", s)
	}
}
