package decode

import (
	"image"
	"math"
)

// resizeRef is the float64 reference for Resizer.Resize: the same antialiased bilinear
// filter evaluated exactly (weights and intermediate in float64, one rounding at the end).
// It allocates freely and is used only by tests.
func resizeRef(dst, src *Image, r image.Rectangle, w, h int) *Image {
	xs, xn, xw := filterWeights(r.Min.X, r.Dx(), w)
	ys, yn, yw := filterWeights(r.Min.Y, r.Dy(), h)
	// Horizontal pass over the rows the vertical pass reads.
	rows := r.Dy()
	tmp := make([]float64, rows*w*3)
	for y := 0; y < rows; y++ {
		srow := src.Pix[(r.Min.Y+y)*src.Stride:]
		for x := 0; x < w; x++ {
			var a, b, c float64
			for k := 0; k < xn; k++ {
				wt := xw[x*xn+k]
				o := 3 * (xs[x] + k)
				a += wt * float64(srow[o])
				b += wt * float64(srow[o+1])
				c += wt * float64(srow[o+2])
			}
			t := tmp[(y*w+x)*3:]
			t[0], t[1], t[2] = a, b, c
		}
	}
	dst.Reset(w, h)
	for y := 0; y < h; y++ {
		drow := dst.Pix[y*dst.Stride:]
		for x := 0; x < w*3; x++ {
			var v float64
			for k := 0; k < yn; k++ {
				v += yw[y*yn+k] * tmp[(ys[y]-r.Min.Y+k)*w*3+x]
			}
			drow[x] = clamp8(v)
		}
	}
	return dst
}

// refValue returns the unrounded reference value of channel c of output (x, y), for
// diagnosing mismatches.
func refValue(src *Image, r image.Rectangle, w, h, x, y, c int) float64 {
	xs, xn, xw := filterWeights(r.Min.X, r.Dx(), w)
	ys, yn, yw := filterWeights(r.Min.Y, r.Dy(), h)
	var v float64
	for j := 0; j < yn; j++ {
		row := src.Pix[(ys[y]+j)*src.Stride:]
		var a float64
		for k := 0; k < xn; k++ {
			a += xw[x*xn+k] * float64(row[3*(xs[x]+k)+c])
		}
		v += yw[y*yn+j] * a
	}
	return v
}

func clamp8(v float64) uint8 {
	v = math.Round(v)
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

// filterWeights computes PIL-style antialiased bilinear weights for resampling n source
// samples starting at off to out samples. It returns, for each output sample, the first
// source index it reads (absolute), the number of taps (the same for all outputs; unused
// taps have weight 0 and stay inside the source range) and the weights, out*taps of them.
func filterWeights(off, n, out int) (start []int, taps int, weights []float64) {
	scale := float64(n) / float64(out)
	fscale := math.Max(scale, 1)
	support := fscale // the triangle filter's support is 1
	taps = int(math.Ceil(support))*2 + 1
	if taps > n {
		taps = n
	}
	start = make([]int, out)
	weights = make([]float64, out*taps)
	for i := 0; i < out; i++ {
		center := (float64(i) + 0.5) * scale
		lo := int(math.Floor(center - support + 0.5))
		hi := int(math.Floor(center + support + 0.5))
		lo = max(lo, 0)
		hi = min(hi, n)
		if lo+taps > n {
			lo = n - taps
		}
		start[i] = off + lo
		var total float64
		w := weights[i*taps : (i+1)*taps]
		for k := 0; k < taps; k++ {
			x := lo + k
			if x >= hi {
				break
			}
			t := math.Abs((float64(x) - center + 0.5) / fscale)
			if t < 1 {
				w[k] = 1 - t
				total += w[k]
			}
		}
		if total > 0 {
			for k := range w {
				w[k] /= total
			}
		}
	}
	return start, taps, weights
}
