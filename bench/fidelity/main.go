// Command fidelity writes conveyor's pixels for the eval recipe and for fixed-box
// RandomResizedCrops of every image under the given folders, with the default decoder
// (the fast path: libjpeg-turbo's DCT scaling, crop-aware and planar decoding), for
// bench/fidelity.sh to compare with torchvision.
//
//	go run ./bench/fidelity -out DIR [-boxes 2] ROOT...
//
// DIR receives one raw 224×224 RGB file per sample and manifest.tsv, a line per sample:
// recipe, image path, crop box (left top width height, or "-"), raw file. The eval
// recipe is Resize(256) (shorter side, torchvision's rounding) then CenterCrop(224); the
// train one resamples a box drawn by RandomResizedCrop's parameters (scale 0.08-1,
// ratio 3/4-4/3) from a generator seeded by the file's path, to 224×224.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/decode"
)

func main() {
	out := flag.String("out", "", "output folder (required)")
	boxes := flag.Int("boxes", 2, "RandomResizedCrop boxes per image")
	exact := flag.Bool("exact", false, "decode as Fidelity Exact does (decode.Options.Exact) instead of the fast path")
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		log.Fatal("usage: fidelity -out DIR [-boxes N] ROOT...")
	}
	if err := run(*out, *boxes, *exact, flag.Args()); err != nil {
		log.Fatal(err)
	}
}

// size is the eval recipe's Resize, crop its CenterCrop and every sample's side.
const size, crop = 256, 224

func run(out string, boxes int, exact bool, roots []string) error {
	eval, err := decode.NewDecoder(&decode.Options{Resize: decode.ResizePolicy{Mode: decode.ResizeShorter, Size: size}, Exact: exact})
	if err != nil {
		return err
	}
	defer eval.Close()
	region, err := decode.NewDecoder(&decode.Options{Exact: exact})
	if err != nil {
		return err
	}
	defer region.Close()
	log.Printf("fidelity: JPEG decoded by %s, WebP by %s, PNG by %s; exact %t", eval.Backend(), eval.WebPBackend(), eval.PNGBackend(), exact)
	files, err := listImages(roots)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	mf, err := os.Create(filepath.Join(out, "manifest.tsv"))
	if err != nil {
		return err
	}
	defer mf.Close()
	s := &sampleWriter{out: out, w: bufio.NewWriter(mf), eval: eval, region: region, boxes: boxes,
		cc: augment.NewCenterCrop(crop, crop), rrc: augment.NewRandomResizedCrop(crop, crop)}
	for _, p := range files {
		if err := s.image(p); err != nil {
			return err
		}
	}
	log.Printf("fidelity: %d samples of %d images in %s", s.n, len(files), out)
	return s.w.Flush()
}

// listImages returns the JPEG, PNG and WebP files under roots, sorted.
func listImages(roots []string) ([]string, error) {
	var files []string
	for _, root := range roots {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			switch strings.ToLower(filepath.Ext(p)) {
			case ".jpg", ".jpeg", ".png", ".webp":
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(files)
	return files, nil
}

// sampleWriter writes each image's samples into out and their lines into the manifest w.
type sampleWriter struct {
	out          string
	w            *bufio.Writer
	eval, region *decode.Decoder
	boxes        int
	cc           *augment.CenterCrop
	rrc          *augment.RandomResizedCrop
	img, tmp     decode.Image
	n            int // samples written
}

// image writes path's eval sample and its RandomResizedCrop boxes; an image smaller than
// the crop after Resize is skipped, saying so.
func (s *sampleWriter) image(p string) error {
	data, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	m, err := s.eval.Decode(&s.img, data)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if m.Width < crop || m.Height < crop {
		log.Printf("fidelity: %s: %dx%d after Resize(%d) is smaller than the crop; skipped", p, m.Width, m.Height, size)
		return nil
	}
	// CenterCrop(224) of the resized image, torchvision's offsets.
	x0, y0 := s.cc.Offset(m.Width, m.Height)
	s.tmp.Reset(crop, crop)
	for y := range crop {
		copy(s.tmp.Row(y), m.Row(y0 + y)[3*x0:3*(x0+crop)])
	}
	if err := s.put("eval", p, "-", &s.tmp); err != nil {
		return err
	}
	cfg, err := s.region.Config(data)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	h := fnv.New64a()
	h.Write([]byte(filepath.Base(filepath.Dir(p)) + "/" + filepath.Base(p)))
	rng := rand.New(rand.NewPCG(h.Sum64(), 1))
	for range s.boxes {
		r := s.rrc.Params(rng, cfg.Width, cfg.Height)
		m, err := s.region.DecodeRegion(&s.img, data, r, crop, crop)
		if err != nil {
			return fmt.Errorf("%s: region %v: %w", p, r, err)
		}
		box := fmt.Sprintf("%d %d %d %d", r.Min.X, r.Min.Y, r.Dx(), r.Dy())
		if err := s.put("train", p, box, m); err != nil {
			return err
		}
	}
	return nil
}

// put writes one crop×crop sample as raw RGB and its manifest line.
func (s *sampleWriter) put(recipe, path, box string, m *decode.Image) error {
	if m.Width != crop || m.Height != crop {
		return fmt.Errorf("%s: %s gave %dx%d", path, recipe, m.Width, m.Height)
	}
	name := fmt.Sprintf("%06d.rgb", s.n)
	s.n++
	pix := make([]byte, 0, 3*crop*crop)
	for y := range m.Height {
		pix = append(pix, m.Row(y)[:3*m.Width]...)
	}
	if err := os.WriteFile(filepath.Join(s.out, name), pix, 0o644); err != nil {
		return err
	}
	abs, _ := filepath.Abs(path)
	_, err := fmt.Fprintf(s.w, "%s\t%s\t%s\t%s\n", recipe, abs, box, name)
	return err
}
