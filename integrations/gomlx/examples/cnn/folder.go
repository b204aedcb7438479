package main

import (
	"fmt"
	"image"
	_ "image/jpeg"
	_ "image/png"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"

	"github.com/disintegration/imaging"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/core/tensors/images"
	"github.com/gomlx/gomlx/pkg/ml/datasets"
)

// folderDataset is the baseline: the same files fed the way GoMLX's examples load images
// (dogsvscats, oxfordflowers102): image.Decode of the whole file, the crop and resize with
// github.com/disintegration/imaging, images.ToTensor for the batch, and
// datasets.Parallel running Yield on several goroutines. The augmentation is the loader's
// train recipe: torchvision's RandomResizedCrop (scale -scale to 1, ratio 3/4-4/3), then a
// horizontal flip with probability 0.5. It feeds training only; validation always reads
// through conveyor.
type folderDataset struct {
	paths  []string
	labels []int32
	size   int
	batch  int
	scale  float64
	flip   bool
	toT    *images.ToTensorConfig

	mu    sync.Mutex
	order []int
	next  int
	epoch int
	seed  uint64
}

// newFolder returns the baseline dataset over the given files, wrapped in datasets.Parallel
// with workers goroutines (0: GoMLX's default, cores+1).
func newFolder(paths []string, labels []int32, size, batch int, scale float64, flip bool, seed uint64, workers int) *datasets.ParallelDataset {
	d := &folderDataset{paths: paths, labels: labels, size: size, batch: batch, scale: scale, flip: flip,
		seed: seed, toT: images.ToTensor(dtypes.Float32)}
	d.shuffle()
	return datasets.CustomParallel(d).Parallelism(workers).Buffer(2).Start()
}

func (d *folderDataset) Name() string { return "folder" }

// shuffle draws the epoch's order; call with mu held.
func (d *folderDataset) shuffle() {
	d.order = make([]int, len(d.paths))
	for i := range d.order {
		d.order[i] = i
	}
	r := rand.New(rand.NewPCG(d.seed, uint64(d.epoch)))
	r.Shuffle(len(d.order), func(i, j int) { d.order[i], d.order[j] = d.order[j], d.order[i] })
	d.next = 0
}

func (d *folderDataset) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.epoch++
	d.shuffle()
}

// Yield decodes the next batch; datasets.Parallel calls it from several goroutines. Like the
// conveyor loader in the training run (DropLast), an epoch drops its short last batch.
func (d *folderDataset) Yield() (spec any, inputs, labels []*tensors.Tensor, err error) {
	d.mu.Lock()
	n := min(d.batch, len(d.order)-d.next)
	if n < d.batch {
		d.mu.Unlock()
		return nil, nil, nil, io.EOF
	}
	idx := d.order[d.next : d.next+n]
	start, epoch := d.next, d.epoch
	d.next += n
	d.mu.Unlock()

	imgs := make([]image.Image, n)
	lab := make([]int32, n)
	for j, i := range idx {
		r := rand.New(rand.NewPCG(d.seed^uint64(epoch)<<32, uint64(start+j)))
		imgs[j], err = d.load(d.paths[i], r)
		if err != nil {
			return nil, nil, nil, err
		}
		lab[j] = d.labels[i]
	}
	x := d.toT.Batch(imgs)
	y := tensors.FromFlatDataAndDimensions(lab, n, 1)
	return nil, []*tensors.Tensor{x}, []*tensors.Tensor{y}, nil
}

func (d *folderDataset) load(path string, r *rand.Rand) (image.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, _, err := image.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	img = imaging.Crop(img, cropBox(img.Bounds(), d.scale, r))
	img = imaging.Resize(img, d.size, d.size, imaging.Linear)
	if d.flip && r.IntN(2) == 1 {
		img = imaging.FlipH(img)
	}
	return img, nil
}

// cropBox draws RandomResizedCrop's box as torchvision does: 10 tries at an area of
// scale-100% and an aspect ratio of 3/4-4/3 (log-uniform), else the centre crop at the
// nearest allowed ratio.
func cropBox(b image.Rectangle, scale float64, r *rand.Rand) image.Rectangle {
	w, h := b.Dx(), b.Dy()
	area := float64(w * h)
	for range 10 {
		a := area * (scale + (1-scale)*r.Float64())
		ratio := math.Exp(math.Log(3./4) + r.Float64()*(math.Log(4./3)-math.Log(3./4)))
		cw := int(math.Round(math.Sqrt(a * ratio)))
		ch := int(math.Round(math.Sqrt(a / ratio)))
		if cw > 0 && ch > 0 && cw <= w && ch <= h {
			x := b.Min.X + r.IntN(w-cw+1)
			y := b.Min.Y + r.IntN(h-ch+1)
			return image.Rect(x, y, x+cw, y+ch)
		}
	}
	cw, ch := w, h
	if float64(w)/float64(h) < 3./4 {
		ch = int(math.Round(float64(w) / (3. / 4)))
	} else if float64(w)/float64(h) > 4./3 {
		cw = int(math.Round(float64(h) * 4. / 3))
	}
	x, y := b.Min.X+(w-cw)/2, b.Min.Y+(h-ch)/2
	return image.Rect(x, y, x+cw, y+ch)
}

// listFolder lists an ImageFolder tree as conveyor's source does, for the baseline.
func listFolder(src interface {
	Len() int
	Label(int) int
	Path(int) string
}, root string) (paths []string, labels []int32) {
	for i := range src.Len() {
		paths = append(paths, filepath.Join(root, filepath.FromSlash(src.Path(i))))
		labels = append(labels, int32(src.Label(i)))
	}
	return paths, labels
}
