// Package toy holds what conveyor's examples share: a small synthetic ImageFolder tree of
// coloured squares and a softmax classifier in pure Go. It uses only conveyor's public
// API and the standard library, so the examples build from any module; it is not part of
// conveyor's API.
package toy

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// palette is the colour of each class's square.
var palette = []color.RGBA{
	{220, 40, 40, 255}, {40, 190, 60, 255}, {50, 80, 230, 255}, {230, 210, 40, 255},
	{200, 60, 210, 255}, {40, 210, 210, 255}, {240, 140, 30, 255}, {235, 235, 235, 255},
}

// DataDir returns dir when it is set; otherwise it writes the examples' generated set (6
// classes of 60 images) into a new temporary directory and returns that. Call cleanup
// when done: it removes what DataDir made.
func DataDir(dir string) (path string, cleanup func(), err error) {
	if dir != "" {
		return dir, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "conveyor-example-")
	if err != nil {
		return "", nil, err
	}
	if err := WriteImageFolder(tmp, 6, 60, 1); err != nil {
		os.RemoveAll(tmp)
		return "", nil, err
	}
	return tmp, func() { os.RemoveAll(tmp) }, nil
}

// WriteImageFolder writes classes×perClass JPEGs of 64 to 128 pixels a side into dir, an
// ImageFolder tree (dir/class0/000.jpg, ...): each a dark background of a random colour
// with one square in its class's colour (jittered), of random size and place. The same
// seed writes the same files. classes is at most 8.
func WriteImageFolder(dir string, classes, perClass int, seed uint64) error {
	if classes < 1 || classes > len(palette) {
		return fmt.Errorf("toy: %d classes not in [1, %d]", classes, len(palette))
	}
	r := rand.New(rand.NewPCG(seed, 0))
	for c := range classes {
		class := filepath.Join(dir, fmt.Sprintf("class%d", c))
		if err := os.MkdirAll(class, 0o755); err != nil {
			return err
		}
		for i := range perClass {
			w, h := 64+r.IntN(65), 64+r.IntN(65)
			img := image.NewRGBA(image.Rect(0, 0, w, h))
			bg := color.RGBA{uint8(r.IntN(90)), uint8(r.IntN(90)), uint8(r.IntN(90)), 255}
			draw.Draw(img, img.Bounds(), image.NewUniform(bg), image.Point{}, draw.Src)
			fg := palette[c]
			for _, v := range []*uint8{&fg.R, &fg.G, &fg.B} {
				*v = uint8(min(max(int(*v)+r.IntN(41)-20, 0), 255))
			}
			s := min(w, h) * (50 + r.IntN(41)) / 100 // 50% to 90% of the shorter side
			x, y := r.IntN(w-s+1), r.IntN(h-s+1)
			draw.Draw(img, image.Rect(x, y, x+s, y+s), image.NewUniform(fg), image.Point{}, draw.Src)
			if err := writeJPEG(filepath.Join(class, fmt.Sprintf("%03d.jpg", i)), img); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeJPEG(name string, img image.Image) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := jpeg.Encode(f, img, &jpeg.Options{Quality: 90}); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Softmax is a linear layer followed by softmax (multinomial logistic regression), trained
// with plain SGD on cross-entropy: the smallest model that learns from a loader's batches.
type Softmax struct {
	in, out int
	w       []float32 // out×in
	bias    []float32
	logits  []float32

	// Gradients accumulated by Accumulate until Update, and the samples they cover.
	gw, gbias []float32
	acc       int
}

// NewSoftmax returns a classifier of in-value samples into classes classes.
func NewSoftmax(in, classes int) *Softmax {
	return &Softmax{in: in, out: classes, w: make([]float32, in*classes),
		bias: make([]float32, classes), logits: make([]float32, classes)}
}

// predict computes sample x's logits and returns the most likely class.
func (m *Softmax) predict(x []float32) int {
	best := 0
	for k := range m.out {
		m.logits[k] = m.bias[k] + dot(m.w[k*m.in:(k+1)*m.in], x)
		if m.logits[k] > m.logits[best] {
			best = k
		}
	}
	return best
}

// Step trains on one batch (len(labels) samples of in values each, as a loader packs them)
// and returns its mean loss and the number of samples classified correctly before the
// update.
func (m *Softmax) Step(x []float32, labels []int32, lr float32) (loss float64, correct int) {
	scale := lr / float32(len(labels))
	for i, y := range labels {
		xi := x[i*m.in : (i+1)*m.in]
		best := m.predict(xi)
		if best == int(y) {
			correct++
		}
		// Softmax with the max subtracted; the gradient of cross-entropy is p - onehot(y).
		var sum float64
		for k := range m.out {
			sum += math.Exp(float64(m.logits[k] - m.logits[best]))
		}
		for k := range m.out {
			p := float32(math.Exp(float64(m.logits[k]-m.logits[best])) / sum)
			if k == int(y) {
				loss -= math.Log(max(float64(p), 1e-12))
				p--
			}
			g := scale * p
			axpy(m.w[k*m.in:(k+1)*m.in], xi, -g)
			m.bias[k] -= g
		}
	}
	return loss / float64(len(labels)), correct
}

// Accumulate adds the cross-entropy gradient of a batch with soft targets (one row of
// classes probabilities per sample, as MixUp, CutMix or label smoothing make them) to the
// model's accumulated gradient without changing the weights, and returns the batch's mean
// loss. Update applies what several calls accumulated, so micro-batches of one batch train
// as the whole batch would.
func (m *Softmax) Accumulate(x, targets []float32) (loss float64) {
	if m.gw == nil {
		m.gw, m.gbias = make([]float32, len(m.w)), make([]float32, m.out)
	}
	n := len(targets) / m.out
	for i := range n {
		xi, ti := x[i*m.in:(i+1)*m.in], targets[i*m.out:(i+1)*m.out]
		best := m.predict(xi)
		var sum float64
		for k := range m.out {
			sum += math.Exp(float64(m.logits[k] - m.logits[best]))
		}
		for k := range m.out {
			p := math.Exp(float64(m.logits[k]-m.logits[best])) / sum
			loss -= float64(ti[k]) * math.Log(max(p, 1e-12))
			// The gradient of cross-entropy with soft targets is p - t.
			g := float32(p) - ti[k]
			axpy(m.gw[k*m.in:(k+1)*m.in], xi, g)
			m.gbias[k] += g
		}
	}
	m.acc += n
	return loss / float64(max(n, 1))
}

// Update takes one SGD step with the mean of the gradients accumulated since the last
// Update, and clears them.
func (m *Softmax) Update(lr float32) {
	if m.acc == 0 {
		return
	}
	scale := -lr / float32(m.acc)
	axpy(m.w, m.gw, scale)
	axpy(m.bias, m.gbias, scale)
	clear(m.gw)
	clear(m.gbias)
	m.acc = 0
}

// Correct returns the number of samples of a batch classified correctly, without training.
func (m *Softmax) Correct(x []float32, labels []int32) int {
	correct := 0
	for i, y := range labels {
		if m.predict(x[i*m.in:(i+1)*m.in]) == int(y) {
			correct++
		}
	}
	return correct
}

func dot(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func axpy(dst, x []float32, a float32) {
	for i := range dst {
		dst[i] += a * x[i]
	}
}
