package decode

import (
	"bytes"
	"errors"
	"image"
	"image/png"
	"math"
	"strings"
	"testing"
)

func TestOutputSize(t *testing.T) {
	shorter := func(n int) ResizePolicy { return ResizePolicy{Mode: ResizeShorter, Size: n} }
	fit := func(w, h int) ResizePolicy { return ResizePolicy{Mode: ResizeFit, Width: w, Height: h} }
	for _, tc := range []struct {
		p            ResizePolicy
		w, h, ww, wh int
	}{
		{ResizePolicy{}, 500, 375, 500, 375},
		// torchvision.transforms.Resize(256): int(256 * long / short).
		{shorter(256), 500, 375, 341, 256},
		{shorter(256), 375, 500, 256, 341},
		{shorter(256), 1920, 1080, 455, 256},
		{shorter(256), 1080, 1920, 256, 455},
		{shorter(256), 300, 300, 256, 256},
		{shorter(224), 640, 427, 335, 224},
		{shorter(256), 256, 1000, 256, 1000}, // already at the target: never upscaled
		{shorter(256), 100, 80, 100, 80},
		{shorter(1), 3, 1000, 1, 333}, // int(1 * 1000 / 3)
		{fit(640, 480), 1920, 1080, 640, 360},
		{fit(640, 480), 1080, 1920, 270, 480},
		{fit(640, 480), 1000, 1000, 480, 480},
		{fit(640, 480), 640, 100, 640, 100},
		{fit(640, 480), 5000, 3, 640, 1}, // at least one pixel
		{fit(100, 100), 301, 200, 100, 66},
		{fit(100, 100), 300, 199, 100, 66},
	} {
		gw, gh := tc.p.OutputSize(tc.w, tc.h)
		if gw != tc.ww || gh != tc.wh {
			t.Errorf("%v.OutputSize(%d, %d) = %d, %d; want %d, %d", tc.p, tc.w, tc.h, gw, gh, tc.ww, tc.wh)
		}
	}
}

func TestOptions(t *testing.T) {
	if got := (*Options)(nil).EnsureDefaults().String(); got != "max_pixels=178956970 orientation=exif resize=none backend=auto" {
		t.Errorf("defaults: %q", got)
	}
	o := (&Options{MaxPixels: 1 << 20, IgnoreOrientation: true, Resize: ResizePolicy{Mode: ResizeFit, Width: 64, Height: 48}, Backend: BackendGo}).EnsureDefaults()
	if got := o.String(); got != "max_pixels=1048576 orientation=ignore resize=fit(64x48) backend=go" {
		t.Errorf("String() = %q", got)
	}
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"negative-limit", Options{MaxPixels: -1}},
		{"limit-above-2^40", Options{MaxPixels: 1<<40 + 1}}, // a PNG's rows would wrap an int64
		{"fit-huge-height", Options{Resize: ResizePolicy{Mode: ResizeFit, Width: 1, Height: math.MaxInt}}},
		{"shorter-huge", Options{Resize: ResizePolicy{Mode: ResizeShorter, Size: 1 << 31}}},
		{"backend", Options{Backend: "cuda"}},
		{"shorter-no-size", Options{Resize: ResizePolicy{Mode: ResizeShorter}}},
		{"shorter-with-box", Options{Resize: ResizePolicy{Mode: ResizeShorter, Size: 5, Width: 3}}},
		{"fit-no-height", Options{Resize: ResizePolicy{Mode: ResizeFit, Width: 5}}},
		{"size-without-mode", Options{Resize: ResizePolicy{Size: 256}}},
		{"unknown-mode", Options{Resize: ResizePolicy{Mode: 7}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			if err := o.EnsureDefaults().Validate(); err == nil || !strings.HasPrefix(err.Error(), "decode: ") {
				t.Errorf("Validate() = %v", err)
			}
			if _, err := NewDecoder(&tc.o); err == nil {
				t.Error("NewDecoder accepted it")
			}
		})
	}
	// NewDecoder copies the options: changing them afterwards changes nothing.
	in := Options{Resize: ResizePolicy{Mode: ResizeShorter, Size: 8}, Backend: BackendGo}
	d, err := NewDecoder(&in)
	if err != nil {
		t.Fatal(err)
	}
	in.Resize.Size = 1000
	if !strings.Contains(d.String(), "shorter(8)") {
		t.Errorf("decoder options changed with the caller's: %s", d)
	}
}

func TestBackendSelection(t *testing.T) {
	d, err := NewDecoder(&Options{Backend: BackendGo})
	if err != nil || d.Backend() != BackendGo || !strings.HasSuffix(d.String(), "backend=go") {
		t.Fatalf("Backend go: %v, %v", d, err)
	}
	auto, err := NewDecoder(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer auto.Close()
	if b := auto.Backend(); b != BackendGo && b != BackendTurbo {
		t.Errorf("auto resolved to %q", b)
	}
	t.Setenv(EnvBackend, "go")
	forced, err := NewDecoder(&Options{Backend: BackendAuto})
	if err != nil || forced.Backend() != BackendGo {
		t.Errorf("with %s=go: %v, %v", EnvBackend, forced, err)
	}
	t.Setenv(EnvBackend, "fast")
	if _, err := NewDecoder(nil); err == nil {
		t.Errorf("%s=fast accepted", EnvBackend)
	}
	if err := (*Decoder)(nil).Close(); err != nil {
		t.Errorf("nil Close: %v", err)
	}
}

// TestDecodeResize checks the resize-first step: the result is the reference resampling
// of the full decode, within ±1.
func TestDecodeResize(t *testing.T) {
	var b bytes.Buffer
	src := photo(97, 61)
	if err := png.Encode(&b, src); err != nil {
		t.Fatal(err)
	}
	full := refRGB(src)
	for _, tc := range []struct {
		p    ResizePolicy
		w, h int
	}{
		{ResizePolicy{Mode: ResizeShorter, Size: 32}, 50, 32},
		{ResizePolicy{Mode: ResizeFit, Width: 40, Height: 40}, 40, 25},
		{ResizePolicy{Mode: ResizeShorter, Size: 100}, 97, 61}, // no upscaling
	} {
		t.Run(tc.p.String(), func(t *testing.T) {
			d := goDecoder(t, Options{Resize: tc.p})
			dst := &Image{}
			for i := 0; i < 2; i++ { // the second round reuses dst and the scratch
				got, err := d.Decode(dst, b.Bytes())
				if err != nil {
					t.Fatal(err)
				}
				if got.Width != tc.w || got.Height != tc.h {
					t.Fatalf("size %dx%d, want %dx%d", got.Width, got.Height, tc.w, tc.h)
				}
				want := resizeRef(&Image{}, full, image.Rect(0, 0, 97, 61), tc.w, tc.h)
				sameImage(t, got, want, 1)
			}
		})
	}
	if _, err := goDecoder(t, Options{}).Decode(nil, nil); !errors.Is(err, ErrUnsupported) {
		t.Errorf("nil data: %v", err)
	}
}

func TestDecoderConfigAppliesLimit(t *testing.T) {
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 40, 30))); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		limit int64
		ok    bool
	}{{1200, true}, {1199, false}} {
		d, err := NewDecoder(&Options{MaxPixels: tc.limit})
		if err != nil {
			t.Fatal(err)
		}
		c, err := d.Config(buf.Bytes())
		if tc.ok != (err == nil) || (!tc.ok && !errors.Is(err, ErrTooLarge)) {
			t.Errorf("limit %d: %v", tc.limit, err)
		}
		if tc.ok && (c.Width != 40 || c.Height != 30 || c.Format != PNG) {
			t.Errorf("limit %d: %+v", tc.limit, c)
		}
	}
}

// Validate reports every invalid field at once, not only the first.
func TestValidateReportsEveryProblem(t *testing.T) {
	o := Options{MaxPixels: -1, Backend: "cuda", Resize: ResizePolicy{Mode: ResizeShorter}}
	err := o.EnsureDefaults().Validate()
	if err == nil {
		t.Fatal("Validate accepted three invalid fields")
	}
	for _, want := range []string{"MaxPixels -1", `backend "cuda"`, "needs Size > 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %q, want it to mention %q", err, want)
		}
	}
}
