package libjpeg

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/conveyor-ml/conveyor/internal/turbojpeg"
)

const fixtures = "../../testdata/decode"

func loadOrSkip(tb testing.TB) *Lib {
	tb.Helper()
	l, err := Load()
	if err != nil {
		tb.Skipf("libjpeg-turbo's libjpeg not available (install libjpeg62-turbo): %v", err)
	}
	return l
}

func newDecoder(tb testing.TB) *Decoder {
	d := loadOrSkip(tb).NewDecoder()
	tb.Cleanup(d.Close)
	return d
}

func read(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// planesGrow returns a grow function over fresh buffers filled with 0xa5, so that a row
// the library did not write cannot pass for one it did.
func planesGrow() func(i, n int) []byte {
	var bufs [3][]byte
	return func(i, n int) []byte {
		if cap(bufs[i]) < n {
			bufs[i] = make([]byte, n)
		}
		b := bufs[i][:n]
		for k := range b {
			b[k] = 0xa5
		}
		return b
	}
}

// texture is a deterministic RGB image with edges and noise.
func texture(w, h int, seed uint64) *image.RGBA {
	r := rand.New(rand.NewPCG(seed, 3))
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			v := uint8((x*5 + y*3) % 256)
			if (x/17+y/13)%4 == 0 {
				v = 255 - v
			}
			m.SetRGBA(x, y, color.RGBA{v, uint8(y * 255 / h), uint8(r.IntN(40) + x%200), 255})
		}
	}
	return m
}

func encode(tb testing.TB, m image.Image, q int) []byte {
	tb.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: q}); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// sequentialFiles returns the fixtures in every sampling and scan layout, and files
// image/jpeg writes (4:2:0 and greyscale) in sizes that end inside an MCU.
func sequentialFiles(tb testing.TB) map[string][]byte {
	files := map[string][]byte{}
	matches, _ := filepath.Glob(filepath.Join(fixtures, "sequential", "*.jpg"))
	if len(matches) == 0 {
		tb.Fatal("no fixtures in testdata/decode/sequential")
	}
	for _, m := range matches {
		files[filepath.Base(m)] = read(tb, filepath.Join("sequential", filepath.Base(m)))
	}
	for i, sz := range [][2]int{{500, 375}, {333, 251}, {17, 9}, {1, 1}, {64, 48}} {
		files[fmt.Sprintf("go-%dx%d.jpg", sz[0], sz[1])] = encode(tb, texture(sz[0], sz[1], uint64(i)), 80)
		g := image.NewGray(image.Rect(0, 0, sz[0], sz[1]))
		for k := range g.Pix {
			g.Pix[k] = uint8(k * 7)
		}
		files[fmt.Sprintf("go-gray-%dx%d.jpg", sz[0], sz[1])] = encode(tb, g, 90)
	}
	return files
}

// TestMatchesTurboJPEG: the planes equal TurboJPEG's tjDecompressToYUVPlanes (the same
// library's IDCT) sample for sample, for whole decodes and for decodes stopped at every
// few rows, in every layout TurboJPEG takes.
func TestMatchesTurboJPEG(t *testing.T) {
	d := newDecoder(t)
	tl, err := turbojpeg.Load()
	if err != nil {
		t.Skipf("libturbojpeg not available: %v", err)
	}
	td, err := tl.NewDecompressor()
	if err != nil {
		t.Fatal(err)
	}
	defer td.Close()
	for name, data := range sequentialFiles(t) {
		want, w, h, sub, err := td.DecodeYUV(data, 1, 1, func(i, n int) []byte { return make([]byte, n) })
		if err != nil {
			t.Logf("%s: TurboJPEG declines it (%v)", name, err)
			continue
		}
		for _, rows := range []int{0, 1, 8, 9, h / 2, h - 1, h, h + 5} {
			p, err := d.DecodeRaw(data, rows, planesGrow())
			if err != nil {
				t.Errorf("%s rows %d: %v", name, rows, err)
				continue
			}
			if p.Width != w || p.Height != h {
				t.Fatalf("%s: %dx%d, TurboJPEG %dx%d", name, p.Width, p.Height, w, h)
			}
			need := rows
			if rows <= 0 || rows > h {
				need = h
			}
			if p.Rows < need || p.Rows > h || (p.Rows < h && p.Rows%(8*p.V[0]) != 0) {
				t.Errorf("%s rows %d: decoded %d rows (iMCU rows of %d)", name, rows, p.Rows, 8*p.V[0])
			}
			for i := range p.Comps {
				pw, ph := turbojpeg.PlaneSize(i, w, h, sub)
				vr := (p.Rows*p.V[i] + p.V[0] - 1) / p.V[0]
				for y := range min(vr, ph) {
					got := p.Pix[i][y*p.Stride[i] : y*p.Stride[i]+pw]
					if !bytes.Equal(got, want[i][y*pw:(y+1)*pw]) {
						t.Fatalf("%s rows %d: plane %d row %d differs from TurboJPEG's", name, rows, i, y)
					}
				}
			}
		}
	}
}

// TestLumaMatchesDjpeg holds the luma plane to the fixtures' djpeg -dct int output.
func TestLumaMatchesDjpeg(t *testing.T) {
	d := newDecoder(t)
	pgms, _ := filepath.Glob(filepath.Join(fixtures, "sequential", "*.y.pgm"))
	compared := 0
	defer func() {
		if compared < 10 {
			t.Errorf("compared %d of %d fixtures", compared, len(pgms))
		}
	}()
	for _, pgm := range pgms {
		name := strings.TrimSuffix(filepath.Base(pgm), ".y.pgm") + ".jpg"
		p, err := d.DecodeRaw(read(t, filepath.Join("sequential", name)), 0, planesGrow())
		if errors.Is(err, ErrUnsupported) {
			continue
		} else if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		raw := read(t, filepath.Join("sequential", filepath.Base(pgm)))
		var magic string
		var w, h, maxv int
		if _, err := fmt.Sscan(string(raw), &magic, &w, &h, &maxv); err != nil || magic != "P5" {
			t.Fatalf("%s: %v", pgm, err)
		}
		pix := raw[len(raw)-w*h:]
		if w != p.Width || h != p.Height {
			t.Fatalf("%s: %dx%d, djpeg %dx%d", name, p.Width, p.Height, w, h)
		}
		for y := range h {
			if !bytes.Equal(p.Pix[0][y*p.Stride[0]:y*p.Stride[0]+w], pix[y*w:(y+1)*w]) {
				t.Fatalf("%s: luma row %d differs from djpeg's", name, y)
			}
		}
		compared++
	}
}

// TestStopsAboveTruncation: a file cut off in its lower half decodes without complaint
// down to rows above the cut, because the data below them is never read, and with a
// warning when asked for all of it.
func TestStopsAboveTruncation(t *testing.T) {
	d := newDecoder(t)
	data := encode(t, texture(320, 240, 9), 85)
	cut := data[:len(data)/2]
	if _, err := d.DecodeRaw(cut, 0, planesGrow()); err == nil {
		t.Fatal("the whole of a truncated file decoded without an error")
	} else if e := (*Error)(nil); !errors.As(err, &e) || !e.Warning {
		t.Fatalf("truncated file: %v, want a libjpeg warning", err)
	}
	p, err := d.DecodeRaw(cut, 48, planesGrow())
	if err != nil {
		t.Fatalf("the top 48 rows of a file cut in half: %v", err)
	}
	if p.Rows != 48 {
		t.Errorf("decoded %d rows, want 48 (three iMCU rows of 16)", p.Rows)
	}
}

// TestBadFiles: every bad file is an error naming what libjpeg found, the decoder goes
// on decoding good files after each, and the process survives.
func TestBadFiles(t *testing.T) {
	d := newDecoder(t)
	good := encode(t, texture(64, 48, 1), 90)
	cases := map[string]struct {
		data        []byte
		unsupported bool
	}{
		"corrupt.jpg":     {data: read(t, "corrupt.jpg")},
		"truncated.jpg":   {data: read(t, "truncated.jpg")},
		"huge.jpg":        {data: read(t, "huge.jpg")},
		"text.txt":        {data: read(t, "text.txt")},
		"empty":           {data: nil},
		"SOI only":        {data: []byte{0xff, 0xd8}},
		"header only":     {data: good[:200]},
		"progressive.jpg": {data: read(t, "progressive.jpg"), unsupported: true},
		"cmyk.jpg":        {data: read(t, "cmyk.jpg"), unsupported: true},
	}
	for name, c := range cases {
		_, err := d.DecodeRaw(c.data, 0, planesGrow())
		switch {
		case err == nil:
			t.Errorf("%s: no error", name)
		case c.unsupported != errors.Is(err, ErrUnsupported):
			t.Errorf("%s: %v (unsupported: %v)", name, err, c.unsupported)
		case !c.unsupported && !strings.HasPrefix(err.Error(), "libjpeg: jpeg_"):
			t.Errorf("%s: %q does not name the libjpeg call", name, err)
		}
		t.Logf("%s: %v", name, err)
		if _, err := d.DecodeRaw(good, 0, planesGrow()); err != nil {
			t.Fatalf("after %s, a good file: %v", name, err)
		}
	}
}

// TestMutations decodes thousands of damaged files: each decodes or fails cleanly.
func TestMutations(t *testing.T) {
	d := newDecoder(t)
	base := encode(t, texture(96, 64, 4), 75)
	r := rand.New(rand.NewPCG(1, 2))
	n := 3000
	if testing.Short() {
		n = 300
	}
	errs := 0
	for range n {
		b := bytes.Clone(base)
		for range 1 + r.IntN(4) {
			b[r.IntN(len(b))] = byte(r.IntN(256))
		}
		if r.IntN(4) == 0 {
			b = b[:r.IntN(len(b))]
		}
		if _, err := d.DecodeRaw(b, r.IntN(80), planesGrow()); err != nil {
			errs++
		}
	}
	if errs == 0 || errs == n {
		t.Errorf("%d of %d damaged files failed: the damage is not reaching the decoder", errs, n)
	}
}

// TestParallel decodes on several goroutines at once, with errors among them.
func TestParallel(t *testing.T) {
	l := loadOrSkip(t)
	good := encode(t, texture(200, 150, 5), 85)
	bad := good[:len(good)/3]
	var want []byte
	{
		d := l.NewDecoder()
		p, err := d.DecodeRaw(good, 0, planesGrow())
		if err != nil {
			t.Fatal(err)
		}
		want = bytes.Clone(p.Pix[0])
		d.Close()
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := l.NewDecoder()
			defer d.Close()
			for i := range 50 {
				if (i+g)%3 == 0 {
					if _, err := d.DecodeRaw(bad, 0, planesGrow()); err == nil {
						t.Error("a truncated file decoded")
					}
					runtime.Gosched()
					continue
				}
				p, err := d.DecodeRaw(good, 0, planesGrow())
				if err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(p.Pix[0], want) {
					t.Error("parallel decode differs")
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestNoTablesAcrossFiles: a file without quantisation tables fails, even right after a
// file that had them (a reused decompressor would take the last file's tables).
func TestNoTablesAcrossFiles(t *testing.T) {
	d := newDecoder(t)
	good := encode(t, texture(32, 32, 2), 90)
	var stripped []byte // good without its DQT segments
	for i := 2; i < len(good); {
		if good[i] != 0xff {
			stripped = append(stripped, good[i:]...)
			break
		}
		n := int(good[i+2])<<8 | int(good[i+3])
		if good[i+1] != 0xdb {
			stripped = append(stripped, good[i:i+2+n]...)
		}
		if good[i+1] == 0xda {
			stripped = append(stripped, good[i+2+n:]...)
			break
		}
		i += 2 + n
	}
	stripped = append([]byte{0xff, 0xd8}, stripped...)
	if _, err := d.DecodeRaw(good, 0, planesGrow()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DecodeRaw(stripped, 0, planesGrow()); err == nil {
		t.Error("a file without quantisation tables decoded with the previous file's")
	}
}

// TestClosed: a closed decoder refuses to decode; Close is idempotent.
func TestClosed(t *testing.T) {
	d := loadOrSkip(t).NewDecoder()
	d.Close()
	d.Close()
	if _, err := d.DecodeRaw(encode(t, texture(8, 8, 1), 90), 0, planesGrow()); err == nil {
		t.Error("a closed decoder decoded")
	}
}

// TestLayout compiles a C program against the installed jpeglib.h and compares the
// offsets this package uses with the compiler's, for the library's own ABI version.
func TestLayout(t *testing.T) {
	l := loadOrSkip(t)
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler: the layout is not checked")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "layout.c")
	prog := `#include <stdio.h>
#include <stddef.h>
#include <jpeglib.h>
#define D(f) printf("%s %zu\n", #f, offsetof(struct jpeg_decompress_struct, f))
int main(void) {
	printf("version %d\nsize %zu\ncomp %zu\n", JPEG_LIB_VERSION,
		sizeof(struct jpeg_decompress_struct), sizeof(jpeg_component_info));
	D(client_data); D(image_width); D(image_height); D(num_components); D(jpeg_color_space);
	D(raw_data_out); D(dct_method); D(output_width); D(output_height); D(output_scanline);
	D(data_precision); D(comp_info); D(max_h_samp_factor); D(max_v_samp_factor); D(progressive_mode);
	printf("h %zu\nv %zu\nwib %zu\n", offsetof(jpeg_component_info, h_samp_factor),
		offsetof(jpeg_component_info, v_samp_factor), offsetof(jpeg_component_info, width_in_blocks));
	printf("error_exit %zu\nemit_message %zu\nformat_message %zu\nerr %zu\n",
		offsetof(struct jpeg_error_mgr, error_exit), offsetof(struct jpeg_error_mgr, emit_message),
		offsetof(struct jpeg_error_mgr, format_message), sizeof(struct jpeg_error_mgr));
	return 0;
}
`
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "layout")
	if out, err := exec.Command(cc, "-o", bin, src).CombinedOutput(); err != nil {
		t.Skipf("cannot compile against jpeglib.h (install libjpeg62-turbo-dev): %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var k string
		var v int
		if _, err := fmt.Sscanf(line, "%s %d", &k, &v); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		got[k] = v
	}
	if got["version"] != l.abi.version {
		t.Skipf("jpeglib.h is version %d, the library loaded (%s) %d", got["version"], l.name, l.abi.version)
	}
	want := map[string]int{
		"size": l.abi.structSize, "comp": compInfoSize, "client_data": offClientData,
		"image_width": offImageWidth, "image_height": offImageHeight, "num_components": offNumComponents,
		"jpeg_color_space": offJPEGColorSpace, "raw_data_out": offRawDataOut, "dct_method": offDCTMethod,
		"output_width": offOutputWidth, "output_height": offOutputHeight, "output_scanline": offOutputScanline,
		"data_precision": offDataPrecision, "comp_info": offCompInfo, "max_h_samp_factor": offMaxHSamp,
		"max_v_samp_factor": offMaxVSamp, "progressive_mode": l.abi.offProgressive,
		"h": offCompH, "v": offCompV, "wib": offCompWidthBlk, "error_exit": offErrorExit,
		"emit_message": offEmitMessage, "format_message": offFormatMessage,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %d here, %d in jpeglib.h", k, v, got[k])
		}
	}
	if got["size"] > len(block{}.cinfo) || got["err"] > len(block{}.err) {
		t.Errorf("block too small for jpeglib.h's structures: %v", got)
	}
}

// TestNoLeakAfterErrors: libjpeg's memory is freed after decodes that end in an error
// (the trampoline drops libjpeg's frames; jpeg_destroy_decompress frees its pools), so
// the resident size stays flat over thousands of them.
func TestNoLeakAfterErrors(t *testing.T) {
	d := newDecoder(t)
	good := encode(t, texture(256, 192, 3), 85)
	bad := [][]byte{good[:len(good)/2], read(t, "corrupt.jpg"), good[:300]}
	rss := func() int64 {
		b, err := os.ReadFile("/proc/self/statm")
		if err != nil {
			t.Skip("no /proc/self/statm: resident size unknown")
		}
		var size, res int64
		fmt.Sscan(string(b), &size, &res)
		return res * int64(os.Getpagesize())
	}
	grow := planesGrow()
	run := func(n int) {
		for i := range n {
			d.DecodeRaw(bad[i%len(bad)], 0, grow)
			if i%10 == 0 {
				if _, err := d.DecodeRaw(good, 0, grow); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	run(2000)
	before := rss()
	run(20000)
	if after := rss(); after-before > 16<<20 {
		t.Errorf("resident size grew by %d MB over 20000 failed decodes", (after-before)>>20)
	}
}
