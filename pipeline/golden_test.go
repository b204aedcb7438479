package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/pack"
)

// The golden photos (testdata/golden): real photographs in every format and JPEG
// subsampling, with torchvision's outputs recorded by make_expected.py.
const goldenDir = "../testdata/golden"

// Fast's bound against torchvision on the golden photos: PSNR, the largest mean
// difference of a channel (levels) and the largest sub-pixel shift (output pixels).
const (
	fastMinPSNR  = 45.0
	fastMaxBias  = 0.5
	fastMaxShift = 0.05
	// minShiftGrad is the least mean squared gradient (levels²/pixel²) at which the
	// shift is checked: below it a shift of 0.2 px moves samples by less than 0.2 levels
	// in RMS, under the rounding noise, and the estimate is noise.
	minShiftGrad = 1.0
	// goExactMinPSNR is Exact's floor with the pure-Go decoders: 52.6 dB at worst on
	// the golden JPEGs (progressive ones, image/jpeg's IDCT), 46.8 dB with chroma
	// replicated instead of upsampled as libjpeg-turbo does.
	goExactMinPSNR = 50.0
)

// fastExempt are the photos Fast does not follow torchvision on, by design.
var fastExempt = map[string]string{
	// Fast keeps a 16-bit level's high byte (a faithful scaling); PIL clamps the level
	// to 255, which turns every level above 255 white.
	"png_grey16_GreenMeadow.png": "16-bit grey: Fast keeps the high byte, PIL clamps to 255",
}

// notExact are the photos whose torchvision pixels Exact cannot reproduce bit for bit
// (make_expected.py stores their pixels instead).
var notExact = map[string]string{
	"jpegcmyk_ColdRipple.jpg": "CMYK JPEGs decode with image/jpeg, whose IDCT rounds differently from libjpeg's",
}

type goldenManifest struct {
	Versions  map[string]string
	Size      int
	Short     int
	Mean, Std [3]float32
	Photos    []struct {
		File        string
		Orientation int
		Setups      map[string]goldenSetup
	}
}

type goldenSetup struct {
	Width, Height  int
	Eval           goldenOutput
	TrainA, TrainB goldenOutput
}

type goldenOutput struct {
	U8, F32 string
	PNG     string // torchvision's pixels, stored for the photos Exact cannot match
	Box     [4]int // left, top, width, height
	Flip    bool
}

// oneFile is a Source of a single file.
type oneFile struct{ dir, name string }

func (s oneFile) Len() int                  { return 1 }
func (s oneFile) Label(int) int             { return 0 }
func (s oneFile) Path(int) string           { return s.name }
func (s oneFile) Classes() []string         { return []string{"golden"} }
func (s oneFile) Open(int) (fs.File, error) { return os.Open(filepath.Join(s.dir, s.name)) }
func (s oneFile) String() string            { return "golden " + s.name }
func (o goldenOutput) rect() image.Rectangle {
	return image.Rect(o.Box[0], o.Box[1], o.Box[0]+o.Box[2], o.Box[1]+o.Box[3])
}
func (o goldenOutput) String() string              { return fmt.Sprintf("box %v flip %t", o.rect(), o.Flip) }
func (o goldenOutput) recorded() bool              { return o.U8 != "" }
func (fixedCrop) String() string                   { return "fixedCrop" }
func (o fixedCrop) Validate() error                { return nil }
func (o fixedCrop) OutputSize(w, h int) (int, int) { return o.w, o.h }

// fixedCrop is RandomResizedCrop at a given box: F.resized_crop(img, top, left, h, w, size).
type fixedCrop struct {
	r    image.Rectangle
	w, h int
}

func (o fixedCrop) Region(c *augment.Context, width, height int) (image.Rectangle, int, int, error) {
	if !o.r.In(image.Rect(0, 0, width, height)) {
		return image.Rectangle{}, 0, 0, fmt.Errorf("box %v outside %dx%d", o.r, width, height)
	}
	return o.r, o.w, o.h, nil
}

func (o fixedCrop) Apply(c *augment.Context, src *decode.Image) (*decode.Image, error) {
	r, w, h, err := o.Region(c, src.Width, src.Height)
	if err != nil {
		return nil, err
	}
	return c.Resizer.Resize(c.Next(src), src, r, w, h)
}

// goldenRun loads one photo through a Loader set up for output key ("eval", "trainA",
// "trainB") of setup ("stock": EXIF ignored, "exif": applied) at fidelity f, and returns
// the uint8 HWC image and, with withF32, the SHA-256 of the normalised float32 CHW tensor.
func goldenRun(t *testing.T, m *goldenManifest, name, setup, key string, out goldenOutput, f Fidelity, backend string, withF32 bool) ([]uint8, string) {
	t.Helper()
	var u8 []uint8
	var f32 string
	dtypes := []pack.DType{pack.Uint8}
	if withF32 {
		dtypes = append(dtypes, pack.Float32)
	}
	for _, dt := range dtypes {
		cfg := Config{Batch: BatchConfig{Size: 1}, Tuning: TuningConfig{Workers: 1, NoAutotune: true}, Order: OrderConfig{Sequential: true}, Bad: BadConfig{Fail: true}, Logf: t.Logf}
		recipe := "eval"
		if key != "eval" {
			recipe = "train"
		}
		if err := ApplyRecipe(&cfg, recipe, m.Size); err != nil {
			t.Fatal(err)
		}
		if key != "eval" {
			flip := 0.0
			if out.Flip {
				flip = 1
			}
			cfg.Augment = augment.Pipeline{fixedCrop{out.rect(), m.Size, m.Size}, &augment.RandomHorizontalFlip{P: flip}}
		}
		cfg.Fidelity = f
		cfg.Decode.Exact = f == Exact
		cfg.Decode.IgnoreOrientation = setup == "stock"
		cfg.Decode.Backend = backend
		cfg.Pack.DType, cfg.Pack.Layout = dt, pack.NHWC
		if dt == pack.Float32 {
			cfg.Pack.Layout, cfg.Pack.Normalize, cfg.Pack.Mean, cfg.Pack.Std = pack.NCHW, true, m.Mean, m.Std
		}
		l, err := New(oneFile{filepath.Join(goldenDir, "photos"), name}, &cfg)
		if err != nil {
			t.Fatal(err)
		}
		for b, err := range l.Epoch(context.Background(), 0) {
			if err != nil {
				l.Close()
				t.Fatalf("%s: %v", name, err)
			}
			if dt == pack.Uint8 {
				u8 = append([]uint8(nil), b.Data...)
			} else {
				buf := make([]byte, 4*len(b.Float32()))
				for i, v := range b.Float32() {
					binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
				}
				s := sha256.Sum256(buf)
				f32 = hex.EncodeToString(s[:])
			}
			b.Release()
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return u8, f32
}

// TestGoldenPhotos runs every golden photo through the loader, end to end (file, decode,
// the eval recipe or a train crop at torchvision's box with its flip, packing), and
// compares with torchvision 0.14 / Pillow 9.4 (testdata/golden/manifest.json):
//
//   - Exact, on the native decoders, must be bit-identical: the uint8 image before
//     normalisation and the normalised float32 tensor.
//   - Fast must be within its bound of Exact's output wherever that matched (and so is
//     torchvision's): PSNR ≥ 45 dB, no channel's mean off by more than 0.5 levels, no
//     sub-pixel shift above 0.05 output pixels.
//   - Exact with the pure-Go decoders (the fallback without libjpeg-turbo) is measured
//     against the same reference and held to a floor of 50 dB: its JPEG IDCT and chroma
//     upsampling are not libjpeg-turbo's.
//
// Set CONVEYOR_GOLDEN_OUT=DIR to have every output written there as PNG, for
// make_expected.py --compare DIR.
func TestGoldenPhotos(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes the golden photos about 400 times")
	}
	data, err := os.ReadFile(filepath.Join(goldenDir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m goldenManifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Photos) < 24 {
		t.Fatalf("manifest.json lists %d photos", len(m.Photos))
	}
	if os.Getenv(decode.EnvBackend) == decode.BackendGo {
		t.Skipf("%s=go: this test decodes with both backends itself, whatever the variable says; the run without it covers the pure-Go decoders", decode.EnvBackend)
	}
	t.Setenv(decode.EnvBackend, "")
	d, err := decode.NewDecoder(&decode.Options{Backend: decode.BackendTurbo})
	if err != nil {
		t.Skipf("libjpeg-turbo is not available (%v): the golden photos are compared on the native decode path only; .ci/run installs libturbojpeg0", err)
	}
	d.Close()
	outDir := os.Getenv("CONVEYOR_GOLDEN_OUT")
	ref := fmt.Sprintf("torchvision %s, Pillow %s, libjpeg-turbo %s", m.Versions["torchvision"], m.Versions["pillow"], m.Versions["libjpeg_turbo"])
	for _, p := range m.Photos {
		for _, setup := range []string{"stock", "exif"} {
			s, ok := p.Setups[setup]
			if !ok {
				continue
			}
			for _, key := range []string{"eval", "trainA", "trainB"} {
				out := map[string]goldenOutput{"eval": s.Eval, "trainA": s.TrainA, "trainB": s.TrainB}[key]
				if !out.recorded() {
					t.Fatalf("%s %s: no %s in manifest.json", p.File, setup, key)
				}
				name := fmt.Sprintf("%s/%s/%s", p.File, setup, key)
				t.Run(name, func(t *testing.T) {
					exact, f32 := goldenRun(t, &m, p.File, setup, key, out, Exact, decode.BackendTurbo, true)
					fast, _ := goldenRun(t, &m, p.File, setup, key, out, Fast, decode.BackendTurbo, false)
					goExact, _ := goldenRun(t, &m, p.File, setup, key, out, Exact, decode.BackendGo, false)
					if outDir != "" {
						for fid, px := range map[string][]uint8{"exact": exact, "fast": fast, "goexact": goExact} {
							writeGoldenPNG(t, filepath.Join(outDir, fmt.Sprintf("%s.%s.%s.%s.png", p.File, setup, key, fid)), px, m.Size)
						}
					}
					// want is torchvision's image: stored, or Exact's once its hash matches.
					want := exact
					if out.PNG != "" {
						want = readGoldenPNG(t, filepath.Join(goldenDir, out.PNG), m.Size)
						q := compareImages(exact, want, m.Size, m.Size)
						t.Logf("exact: %v (not bit-exact by design: %s)", q, notExact[p.File])
						if q.max > 1 {
							t.Errorf("Exact: %v against %s; want at most 1 level off", q, ref)
						}
					} else {
						sum := sha256.Sum256(exact)
						if got := hex.EncodeToString(sum[:]); got != out.U8 {
							t.Fatalf("Exact: uint8 image differs from %s's (%s); CONVEYOR_GOLDEN_OUT=DIR and make_expected.py --compare DIR say by how much", ref, out)
						}
						if f32 != out.F32 {
							t.Errorf("Exact: uint8 image matches but the normalised float32 tensor differs from torch's ToTensor+Normalize")
						}
					}
					q := compareImages(fast, want, m.Size, m.Size)
					t.Logf("fast: %v; go exact: %v", q, compareImages(goExact, want, m.Size, m.Size))
					if why, ok := fastExempt[p.File]; ok {
						t.Logf("Fast bound not applied: %s", why)
					} else if q.psnr < fastMinPSNR || q.maxBias() > fastMaxBias || q.grad >= minShiftGrad && max(math.Abs(q.dx), math.Abs(q.dy)) > fastMaxShift {
						t.Errorf("Fast outside its bound (PSNR ≥ %g dB, |mean| ≤ %g, |shift| ≤ %g px) against %s: %v", fastMinPSNR, fastMaxBias, fastMaxShift, ref, q)
					}
					if g := compareImages(goExact, want, m.Size, m.Size); g.psnr < goExactMinPSNR {
						t.Errorf("Exact on the pure-Go decoders: %v, below %g dB", g, goExactMinPSNR)
					}
				})
			}
		}
	}
}

// imageDiff measures an image against a reference.
type imageDiff struct {
	psnr   float64    // dB; +Inf when identical
	max    int        // largest difference of a sample
	bias   [3]float64 // mean difference per channel
	dx, dy float64    // sub-pixel shift estimate, output pixels
	grad   float64    // the reference's mean squared gradient, levels²/pixel²
}

func (q imageDiff) maxBias() float64 {
	return max(math.Abs(q.bias[0]), math.Abs(q.bias[1]), math.Abs(q.bias[2]))
}

func (q imageDiff) String() string {
	return fmt.Sprintf("PSNR %.2f dB, max %d, mean %+.2f/%+.2f/%+.2f, shift (%+.3f, %+.3f) px (gradient² %.1f)", q.psnr, q.max, q.bias[0], q.bias[1], q.bias[2], q.dx, q.dy, q.grad)
}

// compareImages compares got with want, two w×h packed RGB images. The shift is the
// least-squares solution of got - want ≈ -(dx·∂want/∂x + dy·∂want/∂y) over the interior
// (central differences, all channels): a translation by (dx, dy) pixels of smooth content
// shows as exactly that, while noise and rounding average out.
func compareImages(got, want []uint8, w, h int) imageDiff {
	var q imageDiff
	var se float64
	var sum [3]float64
	for i := range want {
		d := int(got[i]) - int(want[i])
		se += float64(d * d)
		sum[i%3] += float64(d)
		q.max = max(q.max, d, -d)
	}
	n := float64(len(want))
	for c := range sum {
		q.bias[c] = sum[c] / (n / 3)
	}
	q.psnr = math.Inf(1)
	if se > 0 {
		q.psnr = 10 * math.Log10(255*255/(se/n))
	}
	var axx, axy, ayy, bx, by float64
	at := func(x, y, c int) float64 { return float64(want[3*(y*w+x)+c]) }
	for y := 1; y < h-1; y++ {
		for x := 1; x < w-1; x++ {
			for c := range 3 {
				gx := (at(x+1, y, c) - at(x-1, y, c)) / 2
				gy := (at(x, y+1, c) - at(x, y-1, c)) / 2
				d := float64(got[3*(y*w+x)+c]) - at(x, y, c)
				axx += gx * gx
				axy += gx * gy
				ayy += gy * gy
				bx -= gx * d
				by -= gy * d
			}
		}
	}
	q.grad = (axx + ayy) / n
	if det := axx*ayy - axy*axy; det > 0 {
		q.dx = (bx*ayy - by*axy) / det
		q.dy = (by*axx - bx*axy) / det
	}
	return q
}

func readGoldenPNG(t *testing.T, path string, size int) []uint8 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if img.Bounds() != image.Rect(0, 0, size, size) {
		t.Fatalf("%s: %v, want %dx%d", path, img.Bounds(), size, size)
	}
	px := make([]uint8, 0, 3*size*size)
	for y := range size {
		for x := range size {
			r, g, b, _ := img.At(x, y).RGBA()
			px = append(px, uint8(r>>8), uint8(g>>8), uint8(b>>8))
		}
	}
	return px
}

func writeGoldenPNG(t *testing.T, path string, px []uint8, size int) {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	for i := range size * size {
		copy(img.Pix[4*i:], px[3*i:3*i+3])
		img.Pix[4*i+3] = 255
	}
	f, err := os.Create(path)
	if err == nil {
		err = png.Encode(f, img)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}
