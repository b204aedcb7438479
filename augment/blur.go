package augment

import (
	"fmt"
	"math"

	"github.com/conveyor-ml/conveyor/decode"
)

// DefaultBlurSigma is torchvision's GaussianBlur default range of the standard deviation.
var DefaultBlurSigma = [2]float64{0.1, 2}

// GaussianBlur blurs the image with a Gaussian kernel whose standard deviation is drawn
// per sample, like torchvision.transforms.GaussianBlur on a PIL image: sigma uniform in
// [Sigma[0], Sigma[1]] (a float32, as torch draws it), the kernel along each axis
// exp(-x²/2σ²) for x = -(k-1)/2 … (k-1)/2 normalised to sum 1 in float32
// (_get_gaussian_kernel1d), the image padded by reflection (without repeating the edge
// pixel), convolved in float32 and rounded half to even back to 8 bits.
//
// torchvision convolves with the 2-D outer product of the two kernels; GaussianBlur
// convolves separably (columns, then rows), which is the same sum in another order, so a
// value can differ from torchvision's by one level where the float32 result lies within
// rounding error of a half; on photos that is well under 1% of values. Like torch's
// reflection padding, it needs the image to be larger than half the kernel along each
// axis and fails otherwise.
//
// The output goes to a Context buffer. About 0.5 ms per 224×224 image on one core for a
// 3×3 kernel, rising linearly with the kernel's width plus height (3 ms for 23×23).
type GaussianBlur struct {
	KernelWidth, KernelHeight int // kernel size in pixels, odd and positive; required
	// Sigma is the range of the standard deviation in pixels, 0 < Sigma[0] ≤ Sigma[1];
	// zero means DefaultBlurSigma (0.1, 2).
	Sigma [2]float64
}

// NewGaussianBlur returns a GaussianBlur with a size×size kernel and sigma drawn from
// [sigmaMin, sigmaMax].
func NewGaussianBlur(size int, sigmaMin, sigmaMax float64) *GaussianBlur {
	return &GaussianBlur{KernelWidth: size, KernelHeight: size, Sigma: [2]float64{sigmaMin, sigmaMax}}
}

func (o *GaussianBlur) sigma() [2]float64 {
	if o.Sigma == [2]float64{} {
		return DefaultBlurSigma
	}
	return o.Sigma
}

// Validate reports a kernel size that is not odd and positive, or a Sigma that is not
// finite, positive and ascending, as torchvision's GaussianBlur does when built; it makes
// GaussianBlur a Validator.
func (o *GaussianBlur) Validate() error {
	for _, f := range [...]struct {
		name string
		v    int
	}{{"KernelWidth", o.KernelWidth}, {"KernelHeight", o.KernelHeight}} {
		if f.v <= 0 || f.v%2 == 0 {
			return paramErrorf("GaussianBlur", "%s %d must be odd and positive", f.name, f.v)
		}
	}
	s := o.sigma()
	if !(s[0] > 0 && s[0] <= s[1]) || !isFinite(s[1]) {
		return paramErrorf("GaussianBlur", "Sigma %v must be finite, positive and ascending", s)
	}
	return nil
}

// OutputSize returns width, height: GaussianBlur keeps the size. It makes GaussianBlur a
// Sizer.
func (o *GaussianBlur) OutputSize(width, height int) (w, h int) { return width, height }

// Apply blurs src into a Context buffer.
func (o *GaussianBlur) Apply(c *Context, src *decode.Image) (*decode.Image, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s := o.sigma()
	// torch.empty(1).uniform_(lo, hi): a float32 from + u*(to-from).
	sigma := float32(float32(c.Rand.Float32()*float32(s[1]-s[0])) + float32(s[0]))
	if src.Width == 0 || src.Height == 0 {
		return src, nil
	}
	px, py := o.KernelWidth/2, o.KernelHeight/2
	if px >= src.Width || py >= src.Height {
		return nil, fmt.Errorf("augment: GaussianBlur: a %dx%d kernel needs an image larger than %dx%d for reflection padding, got %dx%d",
			o.KernelWidth, o.KernelHeight, px, py, src.Width, src.Height)
	}
	dst := c.Next(src)
	BlurGaussian(dst, src, o.KernelWidth, o.KernelHeight, float64(sigma), c.floatBuf(o.KernelWidth+o.KernelHeight+6*(src.Width+px)))
	return dst, nil
}

func (o *GaussianBlur) String() string {
	s := o.sigma()
	return fmt.Sprintf("GaussianBlur(kernel_size=(%d, %d), sigma=(%g, %g))", o.KernelWidth, o.KernelHeight, s[0], s[1])
}

// gaussianKernel1D fills w (its length is the kernel size, odd) with torchvision's
// _get_gaussian_kernel1d in float32.
func gaussianKernel1D(w []float32, sigma float32) {
	half := len(w) / 2
	var sum float32
	for i := range w {
		x := float32(i-half) / sigma // linspace(-half, half) is exact for odd sizes
		w[i] = float32(math.Exp(float64(float32(-0.5) * float32(x*x))))
		sum += w[i]
	}
	for i := range w {
		w[i] /= sum
	}
}

// BlurGaussian writes into dst (reset to src's size) src convolved with a kw×kh Gaussian
// kernel of standard deviation sigma, as GaussianBlur does for a drawn sigma. kw and kh
// must be odd and positive, and src larger than kw/2 × kh/2. buf is scratch of at least
// kw+kh+6*src.Width+3*(kw-1) float32s, or nil to allocate it.
func BlurGaussian(dst, src *decode.Image, kw, kh int, sigma float64, buf []float32) {
	px, py := kw/2, kh/2
	w3 := 3 * src.Width
	n := kw + kh + 3*(src.Width+2*px) + w3
	if len(buf) < n {
		buf = make([]float32, n)
	}
	wx, wy := buf[:kw:kw], buf[kw:kw+kh:kw+kh]
	acc, sum := buf[kw+kh:n-w3:n-w3], buf[n-w3:n:n]
	gaussianKernel1D(wx, float32(sigma))
	gaussianKernel1D(wy, float32(sigma))
	dst.Reset(src.Width, src.Height)
	mid := acc[3*px : 3*px+w3 : 3*px+w3]
	for y := range src.Height {
		// Columns: the weighted sum of rows y-py … y+py, reflected at the edges.
		for i := range mid {
			mid[i] = 0
		}
		// The float32 conversions of the products keep the compiler from fusing the
		// multiply-adds (it does on arm64), so every architecture rounds the same.
		for k, wk := range wy {
			row := src.Row(padIndex(y+k-py, src.Height, PadReflect))
			for i, v := range row {
				mid[i] += float32(wk * float32(v))
			}
		}
		// Reflect the row's ends into the padding: pixel -p is pixel p, pixel W-1+p is
		// pixel W-1-p.
		for p := 1; p <= px; p++ {
			copy(acc[3*(px-p):3*(px-p)+3], acc[3*(px+p):3*(px+p)+3])
			r := px + src.Width - 1
			copy(acc[3*(r+p):3*(r+p)+3], acc[3*(r-p):3*(r-p)+3])
		}
		// Rows: the weighted sum of pixels x-px … x+px of the padded row, accumulated
		// in sum one tap at a time (the same order as a per-value loop, so the same
		// float32 result, with simpler inner loops).
		for i := range sum {
			sum[i] = 0
		}
		for k, wk := range wx {
			tap := acc[3*k : 3*k+w3 : 3*k+w3]
			for i, v := range tap {
				sum[i] += float32(wk * v)
			}
		}
		out := dst.Row(y)
		for i, v := range sum {
			out[i] = clip8(int(roundEven32(v)))
		}
	}
}

// roundEven32 rounds v, |v| < 2^22, to the nearest integer, halves to even, as
// torch.round does: adding and subtracting 1.5·2^23 leaves no fraction bits, and float32
// addition rounds half to even.
func roundEven32(v float32) float32 {
	const magic = 0x1.8p23
	return float32(v+magic) - magic
}
