package augment

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/decode/decodetest"
)

// refKernel1D transcribes torchvision's _get_gaussian_kernel1d in float64:
// x = linspace(-(k-1)/2, (k-1)/2, k); pdf = exp(-0.5*(x/sigma)^2); pdf / sum(pdf).
func refKernel1D(k int, sigma float64) []float64 {
	half := float64(k-1) * 0.5
	w := make([]float64, k)
	var sum float64
	for i := range w {
		x := -half
		if k > 1 {
			x += float64(i) * (2 * half) / float64(k-1)
		}
		w[i] = math.Exp(-0.5 * (x / sigma) * (x / sigma))
		sum += w[i]
	}
	for i := range w {
		w[i] /= sum
	}
	return w
}

// refBlur transcribes F.gaussian_blur on an image tensor: the 2-D kernel (outer product,
// y by x), reflection padding, a direct 2-D convolution (in float64 here) and
// torch.round (half to even).
func refBlur(m *decode.Image, kw, kh int, sigma float64) *decode.Image {
	wx, wy := refKernel1D(kw, sigma), refKernel1D(kh, sigma)
	px, py := kw/2, kh/2
	out := clone(m)
	for y := range m.Height {
		for x := range m.Width {
			for c := range 3 {
				var s float64
				for i := range kh {
					for j := range kw {
						sy, sx := y+i-py, x+j-px
						if sy < 0 {
							sy = -sy
						} else if sy >= m.Height {
							sy = 2*(m.Height-1) - sy
						}
						if sx < 0 {
							sx = -sx
						} else if sx >= m.Width {
							sx = 2*(m.Width-1) - sx
						}
						s += wy[i] * wx[j] * float64(m.Row(sy)[3*sx+c])
					}
				}
				out.Row(y)[3*x+c] = uint8(math.RoundToEven(s))
			}
		}
	}
	return out
}

func TestGaussianKernel1D(t *testing.T) {
	for _, k := range []int{1, 3, 5, 9, 23} {
		for _, sigma := range []float64{0.1, 0.5, 1, 2, 7.3} {
			w := make([]float32, k)
			gaussianKernel1D(w, float32(sigma))
			want := refKernel1D(k, float64(float32(sigma)))
			for i := range w {
				if d := math.Abs(float64(w[i]) - want[i]); d > 1e-6 {
					t.Errorf("k %d sigma %g: weight %d = %v, want %v", k, sigma, i, w[i], want[i])
				}
			}
		}
	}
}

// TestBlurAgainstTorch compares BlurGaussian with a direct 2-D convolution: every value
// within one level, and at least 99% equal (the stated tolerance: float32 sums in another
// order can tip a value that lies within rounding error of a half).
func TestBlurAgainstTorch(t *testing.T) {
	imgs := map[string]*decode.Image{
		"photo":  photo(t, 1, 67, 45),
		"noise":  decodetest.Noise(2, 40, 31),
		"stride": decodetest.WithStride(photo(t, 3, 24, 24), 3),
		"thin":   decodetest.Noise(4, 12, 2),
	}
	for name, img := range imgs {
		for _, k := range [][2]int{{1, 1}, {3, 3}, {5, 3}, {1, 7}, {9, 9}, {23, 3}} {
			if k[0]/2 >= img.Width || k[1]/2 >= img.Height {
				continue
			}
			for _, sigma := range []float64{0.1, 0.8, 2, 10} {
				t.Run(fmt.Sprintf("%s/%dx%d/%g", name, k[0], k[1], sigma), func(t *testing.T) {
					var got decode.Image
					BlurGaussian(&got, img, k[0], k[1], sigma, nil)
					want := refBlur(img, k[0], k[1], sigma)
					_, worst := pixelDiff(t, &got, want)
					if worst > 1 {
						t.Fatalf("max difference %d, want ≤ 1", worst)
					}
					same := 0
					for y := range got.Height {
						for i, v := range got.Row(y) {
							if v == want.Row(y)[i] {
								same++
							}
						}
					}
					if frac := float64(same) / float64(3*img.Width*img.Height); frac < 0.99 {
						t.Errorf("%.2f%% of values equal, want ≥ 99%%", 100*frac)
					}
				})
			}
		}
	}
	// A flat image stays flat; a 1×1 kernel with any sigma is the identity.
	flat := decodetest.Noise(1, 9, 9)
	for i := range flat.Pix {
		flat.Pix[i] = 200
	}
	var got decode.Image
	BlurGaussian(&got, flat, 7, 7, 3, nil)
	if !equalImages(&got, flat) {
		t.Error("blurring a flat image changed it")
	}
	src := photo(t, 5, 20, 20)
	BlurGaussian(&got, src, 1, 1, 5, nil)
	if !equalImages(&got, src) {
		t.Error("a 1×1 kernel changed the image")
	}
}

// TestGaussianBlurSigma checks GaussianBlur's draw: sigma uniform in the range (KS test
// against the uniform CDF), one draw per sample, and the output that of BlurGaussian with
// the drawn sigma.
func TestGaussianBlurSigma(t *testing.T) {
	op := NewGaussianBlur(5, 0.3, 1.7)
	src := photo(t, 6, 24, 18)
	const n = 3000
	sigmas := make([]float64, n)
	for i := range sigmas {
		c := seeded(int64(i))
		u := c.Rand.Float32()
		sigmas[i] = float64(float32(float32(u*float32(1.7-0.3)) + 0.3))
		if i < 50 {
			var want decode.Image
			BlurGaussian(&want, src, 5, 5, sigmas[i], nil)
			got, err := op.Apply(seeded(int64(i)), src)
			if err != nil {
				t.Fatal(err)
			}
			if got == src || !equalImages(got, &want) {
				t.Fatalf("sample %d: not BlurGaussian with sigma %g in a Context buffer", i, sigmas[i])
			}
		}
	}
	slices.Sort(sigmas)
	var d float64
	for i, s := range sigmas {
		cdf := (s - 0.3) / 1.4
		d = max(d, math.Abs(cdf-float64(i)/n), math.Abs(cdf-float64(i+1)/n))
	}
	if crit := 1.95 / math.Sqrt(n); d > crit { // one-sample KS at significance 0.001
		t.Errorf("KS distance %.4f of sigma from uniform, critical %.4f", d, crit)
	}
	if sigmas[0] < 0.3 || sigmas[n-1] > 1.7 {
		t.Errorf("sigma range [%g, %g] outside [0.3, 1.7]", sigmas[0], sigmas[n-1])
	}
}

func TestGaussianBlurSmallImage(t *testing.T) {
	op := NewGaussianBlur(9, 1, 1)
	_, err := op.Apply(seeded(0), decodetest.Noise(1, 4, 20))
	if err == nil || !strings.HasPrefix(err.Error(), "augment: GaussianBlur: a 9x9 kernel needs an image larger than 4x4") {
		t.Errorf("Apply on 4x20 = %v, want an error", err)
	}
	if out, err := op.Apply(seeded(0), decodetest.Noise(1, 5, 5)); err != nil || out.Width != 5 {
		t.Errorf("Apply on 5x5 = %v, %v", out, err)
	}
}

func TestRoundEven32(t *testing.T) {
	for _, v := range []float32{0, 0.5, 1.5, 2.5, 254.5, 255.49998, 255.5, -0.4, -0.5, 3.4999998, 3.5000002, 100.25, 127.75} {
		if got, want := roundEven32(v), float32(math.RoundToEven(float64(v))); got != want {
			t.Errorf("roundEven32(%v) = %v, want %v", v, got, want)
		}
	}
	for i := range 1 << 20 {
		v := float32(i) / 4096 // every multiple of 1/4096 up to 256, halves included
		if got, want := roundEven32(v), float32(math.RoundToEven(float64(v))); got != want {
			t.Fatalf("roundEven32(%v) = %v, want %v", v, got, want)
		}
	}
}
