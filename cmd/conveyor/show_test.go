package main

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/internal/synth"
)

// tile cuts tile k of a contact sheet of cols columns and tiles of the given size.
func tile(sheet image.Image, k, cols, size int) []byte {
	tw, th := size+2*showPad, size+2*showPad+2*showLine
	x0, y0 := (k%cols)*tw+showPad, (k/cols)*th+showPad
	var out []byte
	for y := y0; y < y0+size; y++ {
		for x := x0; x < x0+size; x++ {
			r, g, b, _ := sheet.At(x, y).RGBA()
			out = append(out, byte(r>>8), byte(g>>8), byte(b>>8))
		}
	}
	return out
}

func readPNG(t *testing.T, name string) image.Image {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// show writes a grid of the batch's samples, each a distinct augmented image with its
// label below, with and without mixing.
func TestShowContactSheet(t *testing.T) {
	dir := t.TempDir()
	if _, err := synth.WriteTree(dir, &synth.TreeOptions{Classes: 2, PerClass: 5, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"plain", nil},
		{"mixed", []string{"--mixup", "0.4", "--cutmix", "1", "--smoothing", "0.1"}},
		{"eval", []string{"--recipe", "eval"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "sheet.png")
			args := append([]string{"show", dir, "-n", "6", "--size", "32", "--out", out}, c.args...)
			code, stdout, stderr := runCLI(t, args...)
			if code != 0 || !strings.Contains(stdout, "wrote "+out+": 6 samples") {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
			}
			sheet := readPNG(t, out)
			// 6 tiles: 3 columns of 2 rows, each 32 px plus padding and two text lines.
			if w, h := sheet.Bounds().Dx(), sheet.Bounds().Dy(); w != 3*(32+2*showPad) || h != 2*(32+2*showPad+2*showLine) {
				t.Fatalf("sheet %dx%d", w, h)
			}
			tiles := map[string]int{}
			for k := range 6 {
				px := tile(sheet, k, 3, 32)
				if bytes.Count(px, px[:1]) == len(px) {
					t.Errorf("tile %d is one flat colour", k)
				}
				tiles[string(px)]++
			}
			if len(tiles) != 6 {
				t.Errorf("%d distinct tiles of 6", len(tiles))
			}
			// Each caption is drawn: white text in the rows below its tile.
			for k := range 6 {
				x0, y0 := (k%3)*(32+2*showPad), (k/3)*(32+2*showPad+2*showLine)+showPad+32
				white := 0
				for y := y0; y < y0+2*showLine; y++ {
					for x := x0; x < x0+32+2*showPad; x++ {
						if r, g, b, _ := sheet.At(x, y).RGBA(); r == 0xffff && g == 0xffff && b == 0xffff {
							white++
						}
					}
				}
				if white < 20 {
					t.Errorf("tile %d: %d text pixels in its caption", k, white)
				}
			}
		})
	}
}

// Mistakes are refused naming what is wrong, and a failure leaves no file behind.
func TestShowErrors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sheet.png")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"show", "/nonexistent/set", "--out", out}, 1, "/nonexistent/set"},
		{[]string{"show", t.TempDir(), "-n", "0", "--out", out}, 2, "-n 0"},
		{[]string{"show", t.TempDir(), "--recipe", "fancy", "--out", out}, 2, `"fancy"`},
		{[]string{"show", "--out", out}, 2, "want one DATASET"},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d naming %s", c.args, code, stderr, c.code, c.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed show left %s (%v)", out, err)
	}
}
