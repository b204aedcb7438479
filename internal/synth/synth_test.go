package synth

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/disintegration/imaging"
	_ "golang.org/x/image/bmp"  // registers "bmp" with image.Decode
	_ "golang.org/x/image/tiff" // registers "tiff" with image.Decode
	// image/gif and image/png register themselves via format.go's imports.
)

func TestGenerateDeterministic(t *testing.T) {
	tests := []struct {
		name          string
		seed          uint64
		class, index  int
		width, height int
	}{
		{"tiny", 1, 0, 0, 1, 1},
		{"odd", 7, 3, 11, 61, 37},
		{"portrait", 0, 9, 2, 40, 90},
		{"imagenet", 42, 5, 1, 500, 375},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Generate(tt.seed, tt.class, tt.index, tt.width, tt.height)
			b := Generate(tt.seed, tt.class, tt.index, tt.width, tt.height)
			if a.Rect != image.Rect(0, 0, tt.width, tt.height) {
				t.Fatalf("bounds %v, want %dx%d", a.Rect, tt.width, tt.height)
			}
			if !bytes.Equal(a.Pix, b.Pix) {
				t.Fatal("same arguments gave different pixels")
			}
			if !a.Opaque() {
				t.Error("image is not opaque")
			}
			if tt.width*tt.height < 100 {
				return
			}
			c := Generate(tt.seed, tt.class, tt.index+1, tt.width, tt.height)
			if bytes.Equal(a.Pix, c.Pix) {
				t.Error("different index gave the same pixels")
			}
			if s := stddev(a); s < 10 {
				t.Errorf("pixel standard deviation %.1f: image too flat to be photo-like", s)
			}
		})
	}
}

// TestClassesLearnable checks that a linear model on 8x8 thumbnails
// separates the classes: a nearest-centroid classifier (linear decision
// boundaries) trained on some images must label held-out ones well.
func TestClassesLearnable(t *testing.T) {
	const classes, train, test = 10, 12, 6
	thumb := func(c, i int) []float64 {
		return downscale(Generate(3, c, i, 64, 48), 8, 8)
	}
	centroids := make([][]float64, classes)
	for c := range classes {
		centroids[c] = make([]float64, 8*8*3)
		for i := range train {
			for k, v := range thumb(c, i) {
				centroids[c][k] += v / train
			}
		}
	}
	correct := 0
	for c := range classes {
		for i := train; i < train+test; i++ {
			x := thumb(c, i)
			best, bestD := -1, math.Inf(1)
			for k, m := range centroids {
				d := 0.0
				for j := range x {
					d += (x[j] - m[j]) * (x[j] - m[j])
				}
				if d < bestD {
					best, bestD = k, d
				}
			}
			if best == c {
				correct++
			}
		}
	}
	acc := float64(correct) / (classes * test)
	t.Logf("nearest-centroid accuracy %.2f (chance %.2f)", acc, 1.0/classes)
	if acc < 0.9 {
		t.Errorf("accuracy %.2f < 0.9: classes are not linearly learnable", acc)
	}
}

func TestEncodeDecodes(t *testing.T) {
	src := Generate(5, 2, 3, 61, 37)
	wantName := map[string]string{"jpg": "jpeg", "png": "png", "gif": "gif", "bmp": "bmp", "tif": "tiff"}
	for _, f := range AllFormats() {
		t.Run(f.String(), func(t *testing.T) {
			var a, b bytes.Buffer
			if err := Encode(&a, src, f); err != nil {
				t.Fatal(err)
			}
			if err := Encode(&b, src, f); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Error("two encodings differ")
			}
			img, name, err := image.Decode(bytes.NewReader(a.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if want := wantName[f.Ext()]; name != want {
				t.Errorf("decoded as %q, want %q", name, want)
			}
			if img.Bounds() != src.Rect {
				t.Errorf("bounds %v, want %v", img.Bounds(), src.Rect)
			}
			// Lossless and palette formats keep their promised pixel type.
			switch f {
			case PNGRGBA:
				if m, ok := img.(*image.NRGBA); !ok || m.Opaque() {
					t.Errorf("decoded %T (opaque), want translucent *image.NRGBA", img)
				}
			case PNG16:
				if _, ok := img.(*image.RGBA64); !ok {
					t.Errorf("decoded %T, want *image.RGBA64", img)
				}
			case PNGGray, JPEGGray:
				if _, ok := img.(*image.Gray); !ok {
					t.Errorf("decoded %T, want *image.Gray", img)
				}
			case PNGPalette, GIF:
				if _, ok := img.(*image.Paletted); !ok {
					t.Errorf("decoded %T, want *image.Paletted", img)
				}
			}
			limit := 30.0
			switch f {
			case PNG, PNG16, BMP, TIFF:
				limit = math.Inf(1)
			case PNGRGBA, PNGGray, JPEGGray:
				limit = -1 // alpha or colour dropped on purpose
			case PNGPalette, GIF:
				limit = 20
			}
			if p := psnr(src, img); p < limit {
				t.Errorf("PSNR %.1f dB < %.1f", p, limit)
			}
		})
	}
	if err := Encode(new(bytes.Buffer), src, numFormats); err == nil {
		t.Error("unknown format: no error")
	}
}

func TestJPEGRoundTrip(t *testing.T) {
	variants := []JPEGOptions{
		{},
		{Progressive: true},
		{Subsample444: true},
		{Subsample444: true, Progressive: true},
		{Gray: true},
		{Gray: true, Progressive: true},
		{Quality: 100, Subsample444: true},
		{Quality: 50},
		{Quality: 5, Progressive: true},
	}
	sizes := []image.Point{{1, 1}, {7, 9}, {16, 16}, {17, 15}, {33, 8}, {8, 33}, {150, 97}}
	for _, o := range variants {
		for _, sz := range sizes {
			t.Run(fmt.Sprintf("%v/%dx%d", &o, sz.X, sz.Y), func(t *testing.T) {
				src := Generate(9, 1, sz.X, sz.X, sz.Y)
				var buf bytes.Buffer
				if err := EncodeJPEG(&buf, src, &o); err != nil {
					t.Fatal(err)
				}
				img, err := jpeg.Decode(bytes.NewReader(buf.Bytes()))
				if err != nil {
					t.Fatal(err)
				}
				if img.Bounds() != src.Rect {
					t.Fatalf("bounds %v, want %v", img.Bounds(), src.Rect)
				}
				ref := image.Image(src)
				if o.Gray {
					ref = toGray(src)
				}
				limit := map[int]float64{0: 30, 100: 40, 50: 26, 5: 14}[o.Quality]
				if !o.Gray && !o.Subsample444 && min(sz.X, sz.Y) < 32 {
					// A whole scene squeezed into a few pixels is mostly
					// chroma edges, which 4:2:0 halves; image/jpeg's own
					// encoder scores the same here (about 29 dB at q90).
					limit -= 3
				}
				if p := psnr(ref, img); p < limit {
					t.Errorf("PSNR %.1f dB < %.0f", p, limit)
				}
			})
		}
	}
}

// TestJPEGMatchesStdlib compares the baseline 4:2:0 encoder with image/jpeg's
// encoder at the same quality: the quality of the two should be alike.
func TestJPEGMatchesStdlib(t *testing.T) {
	src := Generate(11, 4, 0, 200, 150)
	var ours, std bytes.Buffer
	if err := EncodeJPEG(&ours, src, nil); err != nil {
		t.Fatal(err)
	}
	if err := jpeg.Encode(&std, src, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	a, err := jpeg.Decode(&ours)
	if err != nil {
		t.Fatal(err)
	}
	b, err := jpeg.Decode(&std)
	if err != nil {
		t.Fatal(err)
	}
	pa, pb := psnr(src, a), psnr(src, b)
	t.Logf("PSNR ours %.2f dB, image/jpeg %.2f dB", pa, pb)
	if pa < pb-0.5 {
		t.Errorf("PSNR %.2f dB, more than 0.5 dB below image/jpeg's %.2f dB", pa, pb)
	}
}

func TestJPEGStructure(t *testing.T) {
	src := Generate(1, 1, 1, 40, 30)
	tests := []struct {
		opts     JPEGOptions
		sof      byte
		sampling []byte // per component, h<<4|v
		scans    int
	}{
		{JPEGOptions{}, 0xc0, []byte{0x22, 0x11, 0x11}, 1},
		{JPEGOptions{Progressive: true}, 0xc2, []byte{0x22, 0x11, 0x11}, 7},
		{JPEGOptions{Subsample444: true}, 0xc0, []byte{0x11, 0x11, 0x11}, 1},
		{JPEGOptions{Subsample444: true, Progressive: true}, 0xc2, []byte{0x11, 0x11, 0x11}, 7},
		{JPEGOptions{Gray: true}, 0xc0, []byte{0x11}, 1},
		{JPEGOptions{Gray: true, Progressive: true}, 0xc2, []byte{0x11}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.opts.String(), func(t *testing.T) {
			var buf bytes.Buffer
			if err := EncodeJPEG(&buf, src, &tt.opts); err != nil {
				t.Fatal(err)
			}
			segs := segments(t, buf.Bytes())
			var sof []byte
			scans := 0
			for _, s := range segs {
				switch s.marker {
				case 0xc0, 0xc1, 0xc2:
					if s.marker != tt.sof {
						t.Errorf("SOF marker 0x%x, want 0x%x", s.marker, tt.sof)
					}
					sof = s.data
				case 0xda:
					scans++
				}
			}
			if sof == nil {
				t.Fatal("no SOF segment")
			}
			if h, w := binary.BigEndian.Uint16(sof[1:]), binary.BigEndian.Uint16(sof[3:]); w != 40 || h != 30 {
				t.Errorf("SOF size %dx%d, want 40x30", w, h)
			}
			var sampling []byte
			for i := range int(sof[5]) {
				sampling = append(sampling, sof[6+3*i+1])
			}
			if !bytes.Equal(sampling, tt.sampling) {
				t.Errorf("sampling factors %x, want %x", sampling, tt.sampling)
			}
			if scans != tt.scans {
				t.Errorf("%d scans, want %d", scans, tt.scans)
			}
		})
	}
	for _, q := range []int{-1, 101} {
		if err := EncodeJPEG(new(bytes.Buffer), src, &JPEGOptions{Quality: q}); err == nil {
			t.Errorf("quality %d: no error", q)
		}
	}
}

func TestWithOrientation(t *testing.T) {
	src := Generate(2, 0, 0, 48, 32)
	var buf bytes.Buffer
	if err := EncodeJPEG(&buf, src, nil); err != nil {
		t.Fatal(err)
	}
	for o := 1; o <= 8; o++ {
		for _, big := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d/big=%v", o, big), func(t *testing.T) {
				data, err := WithOrientation(buf.Bytes(), o, big)
				if err != nil {
					t.Fatal(err)
				}
				// Re-tagging replaces the segment instead of adding one.
				again, err := WithOrientation(data, o, !big)
				if err != nil {
					t.Fatal(err)
				}
				if len(again) != len(data) {
					t.Errorf("re-tagged length %d, want %d", len(again), len(data))
				}
				if got := exifOrientation(t, data); got != o {
					t.Errorf("parsed orientation %d, want %d", got, o)
				}
				if img, err := jpeg.Decode(bytes.NewReader(data)); err != nil || img.Bounds() != src.Rect {
					t.Fatalf("image/jpeg: %v, %v", err, img)
				}
				// imaging reads the tag independently and rotates.
				img, err := imaging.Decode(bytes.NewReader(data), imaging.AutoOrientation(true))
				if err != nil {
					t.Fatal(err)
				}
				want := image.Pt(48, 32)
				if o >= 5 {
					want = image.Pt(32, 48)
				}
				if got := img.Bounds().Size(); got != want {
					t.Errorf("auto-oriented size %v, want %v", got, want)
				}
			})
		}
	}
	if _, err := WithOrientation(buf.Bytes(), 9, false); err == nil {
		t.Error("orientation 9: no error")
	}
	if _, err := WithOrientation([]byte("not a jpeg"), 1, false); err == nil {
		t.Error("not a JPEG: no error")
	}
}

func TestWriteTree(t *testing.T) {
	opts := &TreeOptions{Classes: 3, PerClass: 5, Formats: AllFormats(), Seed: 4, MinSide: 16, MaxSide: 48}
	dir := t.TempDir()
	files, err := WriteTree(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 15 {
		t.Fatalf("%d files, want 15", len(files))
	}
	classes, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range classes {
		names = append(names, c.Name())
	}
	if want := []string{"class00", "class01", "class02"}; !slices.Equal(names, want) {
		t.Errorf("class folders %v, want %v", names, want)
	}
	seen := map[Format]bool{}
	for i, f := range files {
		seen[f.Format] = true
		if f.Label != i/5 || filepath.Base(filepath.Dir(f.Path)) != names[f.Label] {
			t.Errorf("%s: label %d, in the wrong place", f.Path, f.Label)
		}
		if filepath.Ext(f.Path) != "."+f.Format.Ext() {
			t.Errorf("%s: extension does not match format %v", f.Path, f.Format)
		}
		if f.Width < 16 || f.Width > 48 || f.Height < 16 || f.Height > 48 {
			t.Errorf("%s: size %dx%d outside [16, 48]", f.Path, f.Width, f.Height)
		}
		data, err := os.ReadFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		if cfg.Width != f.Width || cfg.Height != f.Height {
			t.Errorf("%s: decoded size %dx%d, want %dx%d", f.Path, cfg.Width, cfg.Height, f.Width, f.Height)
		}
	}
	if len(seen) != 12 {
		t.Errorf("%d formats in the tree, want 12", len(seen))
	}

	// The same options write the same bytes.
	dir2 := t.TempDir()
	files2, err := WriteTree(dir2, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range files {
		a, _ := os.ReadFile(files[i].Path)
		b, _ := os.ReadFile(files2[i].Path)
		if !bytes.Equal(a, b) || len(a) == 0 {
			t.Errorf("%s and %s differ", files[i].Path, files2[i].Path)
		}
	}

	for _, bad := range []*TreeOptions{
		{Classes: -1},
		{MinSide: 10, MaxSide: 5},
		{Formats: []Format{-1}},
		{Sizes: []image.Point{{0, 3}}},
	} {
		if _, err := WriteTree(t.TempDir(), bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	// Every problem is reported, not only the first.
	bad := &TreeOptions{Classes: -1, MinSide: 10, MaxSide: 5, Formats: []Format{-1}}
	_, err = WriteTree(t.TempDir(), bad)
	for _, want := range []string{"at least one class", "bad side range", "unknown format"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want an error saying %q", bad, err, want)
		}
	}
	if (*TreeOptions)(nil).EnsureDefaults().Validate() != nil || (*JPEGOptions)(nil).EnsureDefaults().Quality != 90 {
		t.Error("the default options do not validate")
	}
	if err := (&JPEGOptions{Quality: 101}).Validate(); err == nil {
		t.Error("JPEG quality 101: no error")
	}
}

func TestImageNetLike(t *testing.T) {
	files, err := ImageNetLike(t.TempDir(), 2, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 6 {
		t.Fatalf("%d files, want 6", len(files))
	}
	for _, f := range files {
		if f.Format != JPEG || max(f.Width, f.Height) != 500 || min(f.Width, f.Height) < 333 {
			t.Errorf("%s: %v %dx%d, want a JPEG about 500x375", f.Path, f.Format, f.Width, f.Height)
		}
		data, err := os.ReadFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := jpeg.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if img.Bounds().Dx() != f.Width || img.Bounds().Dy() != f.Height {
			t.Errorf("%s: decoded %v", f.Path, img.Bounds())
		}
	}
}

// segment is a JPEG marker segment; data excludes the length field.
type segment struct {
	marker byte
	data   []byte
}

// segments splits a JPEG into its marker segments, skipping entropy-coded
// data.
func segments(t *testing.T, b []byte) []segment {
	t.Helper()
	if len(b) < 4 || b[0] != 0xff || b[1] != 0xd8 {
		t.Fatal("no SOI")
	}
	var segs []segment
	for i := 2; i < len(b); {
		if b[i] != 0xff {
			// Entropy-coded data: skip to the next marker that is not
			// a stuffed zero or a restart marker.
			i++
			continue
		}
		m := b[i+1]
		if m == 0 || m == 0xff || (m >= 0xd0 && m <= 0xd7) {
			i += 2
			if m == 0xff {
				i--
			}
			continue
		}
		if m == 0xd9 {
			return segs
		}
		n := int(binary.BigEndian.Uint16(b[i+2:]))
		segs = append(segs, segment{m, b[i+4 : i+2+n]})
		i += 2 + n
	}
	t.Fatal("no EOI")
	return nil
}

// exifOrientation parses the APP1 EXIF segment written by WithOrientation.
func exifOrientation(t *testing.T, b []byte) int {
	t.Helper()
	n := 0
	o := 0
	for _, s := range segments(t, b) {
		if s.marker != 0xe1 || !bytes.HasPrefix(s.data, []byte("Exif\x00\x00")) {
			continue
		}
		n++
		tiff := s.data[6:]
		var order binary.ByteOrder
		switch string(tiff[:2]) {
		case "II":
			order = binary.LittleEndian
		case "MM":
			order = binary.BigEndian
		default:
			t.Fatalf("bad byte order %q", tiff[:2])
		}
		if order.Uint16(tiff[2:]) != 42 {
			t.Fatal("bad TIFF magic")
		}
		ifd := tiff[order.Uint32(tiff[4:]):]
		for i := range int(order.Uint16(ifd)) {
			e := ifd[2+12*i:]
			if order.Uint16(e) == 0x0112 && order.Uint16(e[2:]) == 3 && order.Uint32(e[4:]) == 1 {
				o = int(order.Uint16(e[8:]))
			}
		}
	}
	if n != 1 {
		t.Errorf("%d EXIF segments, want 1", n)
	}
	return o
}

// psnr compares the 8-bit RGB (or gray) values of two images of the same
// size, in dB.
func psnr(a, b image.Image) float64 {
	r := a.Bounds()
	var se float64
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c1 := color.NRGBAModel.Convert(a.At(x, y)).(color.NRGBA)
			c2 := color.NRGBAModel.Convert(b.At(x, y)).(color.NRGBA)
			for _, d := range [3]float64{
				float64(c1.R) - float64(c2.R),
				float64(c1.G) - float64(c2.G),
				float64(c1.B) - float64(c2.B),
			} {
				se += d * d
			}
		}
	}
	if se == 0 {
		return math.Inf(1)
	}
	mse := se / float64(3*r.Dx()*r.Dy())
	return 10 * math.Log10(255*255/mse)
}

func stddev(m *image.NRGBA) float64 {
	var s, s2, n float64
	for i, v := range m.Pix {
		if i%4 == 3 {
			continue
		}
		s += float64(v)
		s2 += float64(v) * float64(v)
		n++
	}
	mean := s / n
	return math.Sqrt(s2/n - mean*mean)
}

// downscale box-filters m to w x h RGB values in [0, 1].
func downscale(m *image.NRGBA, w, h int) []float64 {
	out := make([]float64, w*h*3)
	sw, sh := m.Rect.Dx(), m.Rect.Dy()
	for y := range sh {
		for x := range sw {
			p := m.Pix[y*m.Stride+4*x:]
			k := 3 * ((y*h/sh)*w + x*w/sw)
			for c := range 3 {
				out[k+c] += float64(p[c]) / 255 * float64(w*h) / float64(sw*sh)
			}
		}
	}
	return out
}

// A file that cannot be written fails WriteTree, naming it, and stops the other workers.
func TestWriteTreeError(t *testing.T) {
	dir := t.TempDir()
	blocked := filepath.Join(dir, "class01", "00012.jpg") // a directory where the image goes
	if err := os.MkdirAll(blocked, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := WriteTree(dir, &TreeOptions{Classes: 4, PerClass: 10})
	if err == nil || !strings.Contains(err.Error(), blocked) {
		t.Errorf("WriteTree with %s a directory: %v, want an error naming it", blocked, err)
	}
}
