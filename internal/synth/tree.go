package synth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// TreeOptions describes an ImageFolder tree for [WriteTree]. A nil
// *TreeOptions means the defaults.
type TreeOptions struct {
	// Classes is the number of class folders. Default 10.
	Classes int
	// PerClass is the number of images in each class. Default 10.
	PerClass int
	// Formats are cycled over the images in tree order, so with several
	// formats every class gets a mix. Default {JPEG}.
	Formats []Format
	// Seed selects the images; the same options give the same bytes.
	// Default 0.
	Seed uint64
	// MinSide and MaxSide bound both sides of every image. The longer side
	// is uniform in [MinSide, MaxSide] and the aspect ratio is one of 1:1,
	// 4:3, 3:2, 16:9 and 2:1, landscape or portrait, so most sizes are not
	// multiples of 8. Defaults 64 and 256.
	MinSide, MaxSide int
	// Sizes, when not empty, replaces MinSide and MaxSide: each image's
	// size is drawn uniformly from it (repeat an entry to weight it).
	// Default empty.
	Sizes []image.Point
}

// clone returns a copy of o that shares no slices with it, the zero value for nil.
func (o *TreeOptions) clone() TreeOptions {
	var c TreeOptions
	if o != nil {
		c = *o
	}
	c.Formats = slices.Clone(c.Formats)
	c.Sizes = slices.Clone(c.Sizes)
	return c
}

// EnsureDefaults fills o's zero fields with their defaults and returns o; a nil o
// becomes a new TreeOptions holding the defaults.
func (o *TreeOptions) EnsureDefaults() *TreeOptions {
	if o == nil {
		o = &TreeOptions{}
	}
	if o.Classes == 0 {
		o.Classes = 10
	}
	if o.PerClass == 0 {
		o.PerClass = 10
	}
	if len(o.Formats) == 0 {
		o.Formats = []Format{JPEG}
	}
	if o.MinSide == 0 {
		o.MinSide = 64
	}
	if o.MaxSide == 0 {
		o.MaxSide = max(256, o.MinSide)
	}
	return o
}

// Validate reports every invalid field of o, defaults filled (see EnsureDefaults),
// joined into one error; nil when all are valid.
func (o *TreeOptions) Validate() error {
	var errs []error
	if o.Classes < 1 || o.PerClass < 1 {
		errs = append(errs, fmt.Errorf("synth: tree needs at least one class and one image per class, not %d and %d", o.Classes, o.PerClass))
	}
	for _, f := range o.Formats {
		if !f.valid() {
			errs = append(errs, fmt.Errorf("synth: unknown format %v", f))
		}
	}
	if o.MinSide < 1 || o.MaxSide < o.MinSide || o.MaxSide > 0xffff {
		errs = append(errs, fmt.Errorf("synth: bad side range [%d, %d]", o.MinSide, o.MaxSide))
	}
	for _, s := range o.Sizes {
		if s.X < 1 || s.Y < 1 || s.X > 0xffff || s.Y > 0xffff {
			errs = append(errs, fmt.Errorf("synth: bad image size %v", s))
		}
	}
	return errors.Join(errs...)
}

// String prints the effective options.
func (o *TreeOptions) String() string {
	opts := o.clone()
	opts.EnsureDefaults()
	names := make([]string, len(opts.Formats))
	for i, f := range opts.Formats {
		names[i] = f.String()
	}
	sizes := fmt.Sprintf("sides %d-%d", opts.MinSide, opts.MaxSide)
	if len(opts.Sizes) > 0 {
		sizes = fmt.Sprintf("%d sizes", len(opts.Sizes))
	}
	return fmt.Sprintf("%d classes x %d, formats %s, seed %d, %s",
		opts.Classes, opts.PerClass, strings.Join(names, ","), opts.Seed, sizes)
}

// File is one image written by [WriteTree].
type File struct {
	Path          string // dir/classNN/NNNNN.ext
	Label         int    // class index; folder names sort in label order
	Format        Format
	Width, Height int
}

// aspects are width:height ratios, as (long, short) pairs.
var aspects = [...][2]int{{1, 1}, {4, 3}, {3, 2}, {16, 9}, {2, 1}}

// WriteTree writes an ImageFolder tree under dir, creating it if needed:
// dir/class00/00000.jpg, dir/class00/00001.png, ..., with folder names
// zero-padded so that they sort in label order and file numbers unique across
// the tree. It returns the files in tree order (by label, then number).
// Images are encoded on GOMAXPROCS goroutines; the bytes written depend only
// on the options.
func WriteTree(dir string, o *TreeOptions) ([]File, error) {
	opts := o.clone()
	if err := opts.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	classDigits := max(2, len(fmt.Sprint(opts.Classes-1)))
	total := opts.Classes * opts.PerClass
	fileDigits := max(5, len(fmt.Sprint(total-1)))
	files := make([]File, total)
	for c := range opts.Classes {
		class := fmt.Sprintf("class%0*d", classDigits, c)
		if err := os.MkdirAll(filepath.Join(dir, class), 0o755); err != nil {
			return nil, fmt.Errorf("synth: %w", err)
		}
		for i := range opts.PerClass {
			n := c*opts.PerClass + i
			f := opts.Formats[n%len(opts.Formats)]
			sz := opts.size(c, i)
			files[n] = File{
				Path:   filepath.Join(dir, class, fmt.Sprintf("%0*d.%s", fileDigits, n, f.Ext())),
				Label:  c,
				Format: f,
				Width:  sz.X,
				Height: sz.Y,
			}
		}
	}

	// Each worker takes the next file number; the first error stops all.
	var next atomic.Int64
	g, ctx := errgroup.WithContext(context.Background())
	for range min(runtime.GOMAXPROCS(0), total) {
		g.Go(func() error {
			var buf bytes.Buffer
			for ctx.Err() == nil {
				n := int(next.Add(1) - 1)
				if n >= total {
					return nil
				}
				if err := writeFile(&files[n], n%opts.PerClass, opts.Seed, &buf); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return files, nil
}

func writeFile(f *File, index int, seed uint64, buf *bytes.Buffer) error {
	buf.Reset()
	img := Generate(seed, f.Label, index, f.Width, f.Height)
	if err := Encode(buf, img, f.Format); err != nil {
		return fmt.Errorf("synth: %s: %w", f.Path, err)
	}
	if err := os.WriteFile(f.Path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}

// size picks the size of image i of class c.
func (o *TreeOptions) size(c, i int) image.Point {
	r := newRNG(streamSize, o.Seed, c, i)
	if len(o.Sizes) > 0 {
		return o.Sizes[r.intn(len(o.Sizes))]
	}
	long := o.MinSide + r.intn(o.MaxSide-o.MinSide+1)
	a := aspects[r.intn(len(aspects))]
	short := max((long*a[1]+a[0]/2)/a[0], o.MinSide)
	if r.intn(2) == 0 {
		return image.Pt(long, short)
	}
	return image.Pt(short, long)
}

// imageNetSizes weights the commonest ImageNet validation sizes roughly by
// frequency: most photos are 500 pixels on the long side, and landscape
// 500x375 is by far the commonest.
var imageNetSizes = []image.Point{
	{500, 375}, {500, 375}, {500, 375}, {500, 375}, {500, 375},
	{500, 375}, {500, 375}, {500, 375}, {500, 375}, {500, 375},
	{375, 500}, {375, 500}, {375, 500},
	{500, 333}, {500, 333}, {500, 333},
	{500, 334}, {333, 500}, {500, 500}, {500, 400},
}

// ImageNetLike writes a tree of quality-90 baseline 4:2:0 JPEGs shaped like
// the ImageNet validation set: about half 500x375, the rest 375x500, 500x333,
// 333x500, 500x500 and so on. Files are about 50 KB, less than the 110 KB
// average of the real ones, so they decode somewhat faster; each takes about
// 15 ms of CPU to make. It is WriteTree with those sizes and format.
func ImageNetLike(dir string, classes, perClass int, seed uint64) ([]File, error) {
	if classes < 1 || perClass < 1 {
		return nil, fmt.Errorf("synth: ImageNetLike needs at least one class and one image per class, not %d and %d", classes, perClass)
	}
	return WriteTree(dir, &TreeOptions{
		Classes:  classes,
		PerClass: perClass,
		Formats:  []Format{JPEG},
		Seed:     seed,
		Sizes:    imageNetSizes,
	})
}
