package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/conveyor-ml/conveyor/mixup"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pipeline"
	"github.com/conveyor-ml/conveyor/source"
)

// showFlags are show's settings.
type showFlags struct {
	n, size, cols, epoch int
	recipe, out          string
	seed                 uint64
	mixUp, cutMix        float64
	smoothing            float64
}

func show(args []string, stdout, stderr io.Writer) (err error) {
	ctx, stop := commandContext()
	defer stop()
	defer func() { err = interrupted(ctx, err) }()
	fs := flag.NewFlagSet("show", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: conveyor show DATASET [flags]\n\nWrites a contact sheet: the first batch of an epoch, after the recipe's augmentations\n(and after mixing, with --mixup or --cutmix), one tile per sample with its label, as a\nPNG. The picture to look at before a long run. DATASET is anything bench reads: an\nImageFolder tree, a converted dataset, a manifest (.csv, .jsonl), WebDataset shards (a\nfolder of .tar files, a pattern) or an s3:// or http(s):// URL.\n\nflags:\n")
		fs.PrintDefaults()
	}
	var f showFlags
	fs.IntVar(&f.n, "n", 16, "samples to show, at most 1024")
	fs.IntVar(&f.size, "size", 160, "the recipe's output size: each tile's side in pixels")
	fs.IntVar(&f.cols, "cols", 0, "tiles per row (default: a square-ish grid)")
	fs.IntVar(&f.epoch, "epoch", 0, "the epoch to show; augmentations and order differ per epoch")
	fs.StringVar(&f.recipe, "recipe", "train", "preprocessing: "+strings.Join(pipeline.Recipes, ", "))
	fs.StringVar(&f.out, "out", "show.png", "the PNG file to write")
	fs.Uint64Var(&f.seed, "seed", 0, "sample order and augmentation seed")
	fs.Float64Var(&f.mixUp, "mixup", 0, "MixUp alpha (0: off)")
	fs.Float64Var(&f.cutMix, "cutmix", 0, "CutMix alpha (0: off)")
	fs.Float64Var(&f.smoothing, "smoothing", 0, "label smoothing, in [0, 1)")
	allowEmpty := fs.Bool(allowEmptyFlag, false, allowEmptyUsage)
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if err := f.check(pos); err != nil {
		return err
	}
	ds, err := openDataset(ctx, pos[0], &source.OpenOptions{Folder: &source.FolderOptions{AllowEmptyClasses: *allowEmpty}})
	if err != nil {
		return err // source.Open names the dataset as given
	}
	defer ds.Close()
	sheet, n, err := f.render(ctx, ds.Source)
	if err != nil {
		return err
	}
	if err := writePNG(f.out, sheet); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %s of %v (%s, %d px, epoch %d), %dx%d pixels\n",
		f.out, plural(n, "sample"), ds, f.recipe, f.size, f.epoch, sheet.Bounds().Dx(), sheet.Bounds().Dy())
	return nil
}

// check refuses bad flags and arguments as usage errors.
func (f *showFlags) check(pos []string) error {
	switch {
	case len(pos) != 1:
		return usagef("want one DATASET (a folder, shards or a URL), got %d arguments", len(pos))
	case f.n < 1 || f.n > 1024:
		return usagef("-n %d: want 1 to 1024 samples", f.n)
	case f.size < 8 || f.size > 1024:
		return usagef("--size %d: want 8 to 1024 pixels", f.size)
	case f.cols < 0:
		return usagef("--cols %d: want a positive number of tiles per row", f.cols)
	case f.epoch < 0:
		return usagef("--epoch %d: want 0 or more", f.epoch)
	case !slices.Contains(pipeline.Recipes, f.recipe):
		return usagef("--recipe %q: want one of %s", f.recipe, strings.Join(pipeline.Recipes, ", "))
	case f.out == "":
		return usagef("--out: want a file name")
	}
	return nil
}

// render loads the first batch of f.epoch in uint8 pixels and draws it.
func (f *showFlags) render(ctx context.Context, src pipeline.Source) (*image.RGBA, int, error) {
	cfg := &pipeline.Config{
		Batch: pipeline.BatchConfig{Size: min(f.n, src.Len())},
		Order: pipeline.OrderConfig{Seed: f.seed},
		Pack:  pack.Options{DType: pack.Uint8, Layout: pack.NHWC},
		Mix:   mixup.Options{MixUp: f.mixUp, CutMix: f.cutMix, Smoothing: f.smoothing},
		Logf:  func(string, ...any) {},
	}
	if err := pipeline.ApplyRecipe(cfg, f.recipe, f.size); err != nil {
		return nil, 0, err
	}
	ld, err := pipeline.New(src, cfg)
	if err != nil {
		return nil, 0, err
	}
	defer ld.Close()
	for b, err := range ld.Epoch(ctx, f.epoch) {
		if err != nil {
			return nil, 0, err
		}
		sheet := f.draw(b, src.Classes())
		n := b.Len
		b.Release()
		return sheet, n, nil
	}
	return nil, 0, errors.New("the epoch delivered no batch")
}

// Tile geometry: each tile is the sample, then two lines of label text.
const (
	showPad   = 4
	showLine  = 13 // basicfont.Face7x13's height
	showChars = 7  // its advance
)

// draw lays the batch's samples out in a grid, each above its label.
func (f *showFlags) draw(b *pipeline.Batch, classes []string) *image.RGBA {
	cols := f.cols
	if cols == 0 {
		cols = int(math.Ceil(math.Sqrt(float64(b.Len))))
	}
	cols = min(cols, b.Len)
	rows := (b.Len + cols - 1) / cols
	tw, th := f.size+2*showPad, f.size+2*showPad+2*showLine
	sheet := image.NewRGBA(image.Rect(0, 0, cols*tw, rows*th))
	draw.Draw(sheet, sheet.Bounds(), image.NewUniform(color.RGBA{32, 32, 32, 255}), image.Point{}, draw.Src)
	h, w := b.Shape[1], b.Shape[2]
	per := h * w * 3
	face := basicfont.Face7x13
	for s := range b.Len {
		x0, y0 := (s%cols)*tw+showPad, (s/cols)*th+showPad
		px := b.Data[s*per : (s+1)*per]
		for y := range h {
			row := sheet.Pix[(y0+y)*sheet.Stride+x0*4:]
			for x := range w {
				copy(row[x*4:x*4+3], px[(y*w+x)*3:(y*w+x)*3+3])
				row[x*4+3] = 255
			}
		}
		lines := labelLines(b, s, classes, f.size/showChars)
		for k, line := range lines {
			d := font.Drawer{Dst: sheet, Src: image.White, Face: face,
				Dot: fixed.P(x0, y0+h+showLine*(k+1)-2)}
			d.DrawString(line)
		}
	}
	return sheet
}

// labelLines is a tile's caption: its class (or, with soft targets, its two largest
// weights) and its source index, each cut to width bytes in the middle (the font has
// ASCII glyphs only: other class names show as boxes, and a cut may split one).
func labelLines(b *pipeline.Batch, s int, classes []string, width int) []string {
	name := func(label int) string {
		if label >= 0 && label < len(classes) {
			return classes[label]
		}
		return fmt.Sprintf("#%d", label)
	}
	first, second := name(int(b.Labels[s])), ""
	if b.NumClasses > 0 && len(b.Targets) >= (s+1)*b.NumClasses {
		row := b.Targets[s*b.NumClasses : (s+1)*b.NumClasses]
		order := make([]int, len(row))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, c int) int {
			switch {
			case row[a] > row[c]:
				return -1
			case row[a] < row[c]:
				return 1
			}
			return 0
		})
		first = fmt.Sprintf("%s %.2f", name(order[0]), row[order[0]])
		if len(order) > 1 && row[order[1]] > row[order[len(order)-1]] {
			second = fmt.Sprintf("%s %.2f ", name(order[1]), row[order[1]])
		}
	}
	cut := func(t string) string { // keep both ends: class names often share a prefix
		if len(t) <= width {
			return t
		}
		if width < 5 {
			return t[:max(width, 0)]
		}
		head := (width - 2) / 2
		return t[:head] + ".." + t[len(t)-(width-2-head):]
	}
	return []string{cut(first), cut(second + fmt.Sprintf("#%d", b.Indices[s]))}
}

// writePNG writes img to name through a temporary file beside it, so a failure leaves
// no partial file.
func writePNG(name string, img image.Image) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := png.Encode(tmp, img); err != nil {
		tmp.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return os.Rename(tmp.Name(), name)
}
