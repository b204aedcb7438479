package augment

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/decode/decodetest"
)

// Every op of the package implements both optional interfaces.
var (
	_ interface {
		Validator
		Sizer
	} = (*RandomResizedCrop)(nil)
	_ interface {
		Validator
		Sizer
	} = (*Resize)(nil)
	_ interface {
		Validator
		Sizer
	} = (*CenterCrop)(nil)
	_ interface {
		Validator
		Sizer
	} = (*RandomHorizontalFlip)(nil)
	_ interface {
		Validator
		Sizer
	} = (*RandomVerticalFlip)(nil)
	_ interface {
		Validator
		Sizer
	} = (*ColorJitter)(nil)
	_ interface {
		Validator
		Sizer
	} = (*RandomGrayscale)(nil)
)

// opaque is a user op that implements neither Validator nor Sizer.
type opaque struct{}

func (opaque) Apply(c *Context, src *decode.Image) (*decode.Image, error) { return src, nil }
func (opaque) String() string                                             { return "opaque" }

// checked is a user op with its own Validate.
type checked struct{ err error }

func (o checked) Apply(c *Context, src *decode.Image) (*decode.Image, error) { return src, o.err }
func (o checked) Validate() error                                            { return o.err }
func (o checked) String() string                                             { return "checked" }

// TestOpValidate checks that every invalid parameter is reported with the op and the
// field named, that Apply rejects it too where it did before, and that valid parameters
// pass.
func TestOpValidate(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tt := range []struct {
		op   Op
		want string // "" for valid; else the error, or its start up to the value
	}{
		{NewRandomResizedCrop(224, 224), ""},
		{&RandomResizedCrop{Width: 1, Height: 1}, ""}, // zero Scale and Ratio: defaults
		{&RandomResizedCrop{Width: 8, Height: 8, Scale: [2]float64{0, 2}, Ratio: [2]float64{1, 1}}, ""},
		{&RandomResizedCrop{Width: 0, Height: 10}, "augment: RandomResizedCrop: Width 0 must be positive"},
		{&RandomResizedCrop{Width: 10, Height: -1}, "augment: RandomResizedCrop: Height -1 must be positive"},
		{&RandomResizedCrop{Width: 10, Height: 10, Scale: [2]float64{0.5, 0.1}}, "augment: RandomResizedCrop: Scale (0.5, 0.1) "},
		{&RandomResizedCrop{Width: 10, Height: 10, Scale: [2]float64{-0.1, 1}}, "augment: RandomResizedCrop: Scale (-0.1, 1) "},
		{&RandomResizedCrop{Width: 10, Height: 10, Scale: [2]float64{0.1, inf}}, "augment: RandomResizedCrop: Scale (0.1, +Inf) "},
		{&RandomResizedCrop{Width: 10, Height: 10, Scale: [2]float64{nan, 1}}, "augment: RandomResizedCrop: Scale (NaN, 1) "},
		{&RandomResizedCrop{Width: 10, Height: 10, Ratio: [2]float64{0, 1}}, "augment: RandomResizedCrop: Ratio (0, 1) "},
		{&RandomResizedCrop{Width: 10, Height: 10, Ratio: [2]float64{2, 1}}, "augment: RandomResizedCrop: Ratio (2, 1) "},
		{&RandomResizedCrop{Width: 10, Height: 10, Ratio: [2]float64{1, inf}}, "augment: RandomResizedCrop: Ratio (1, +Inf) "},

		{NewResize(256), ""},
		{NewResizeTo(32, 24), ""},
		{&Resize{Size: 5, Width: -1}, ""}, // Width and Height are unused with Size
		{&Resize{}, "augment: Resize: Width 0 must be positive when Size is 0"},
		{&Resize{Size: -1}, "augment: Resize: Size -1 must be ≥ 0"},
		{NewResizeTo(0, 24), "augment: Resize: Width 0 must be positive when Size is 0"},
		{NewResizeTo(32, -2), "augment: Resize: Height -2 must be positive when Size is 0"},

		{NewCenterCrop(224, 224), ""},
		{NewCenterCrop(0, 224), "augment: CenterCrop: Width 0 must be positive"},
		{NewCenterCrop(224, -3), "augment: CenterCrop: Height -3 must be positive"},

		{NewRandomHorizontalFlip(0), ""},
		{NewRandomHorizontalFlip(1), ""},
		{NewRandomHorizontalFlip(1.5), "augment: RandomHorizontalFlip: P 1.5 not in [0, 1]"},
		{NewRandomHorizontalFlip(-0.1), "augment: RandomHorizontalFlip: P -0.1 not in [0, 1]"},
		{NewRandomHorizontalFlip(nan), "augment: RandomHorizontalFlip: P NaN not in [0, 1]"},
		{NewRandomVerticalFlip(0.5), ""},
		{NewRandomVerticalFlip(2), "augment: RandomVerticalFlip: P 2 not in [0, 1]"},
		{NewRandomVerticalFlip(-1), "augment: RandomVerticalFlip: P -1 not in [0, 1]"},

		{&ColorJitter{}, ""},
		{NewColorJitter(0.4, 0.4, 0.4, 0.1), ""},
		{NewColorJitter(2, 2, 2, 0.5), ""},
		{&ColorJitter{Brightness: -0.1}, "augment: ColorJitter: Brightness -0.1 must be finite and ≥ 0"},
		{&ColorJitter{Brightness: inf}, "augment: ColorJitter: Brightness +Inf must be finite and ≥ 0"},
		{&ColorJitter{Contrast: nan}, "augment: ColorJitter: Contrast NaN must be finite and ≥ 0"},
		{&ColorJitter{Contrast: -1}, "augment: ColorJitter: Contrast -1 must be finite and ≥ 0"},
		{&ColorJitter{Saturation: inf}, "augment: ColorJitter: Saturation +Inf must be finite and ≥ 0"},
		{&ColorJitter{Saturation: -0.5}, "augment: ColorJitter: Saturation -0.5 must be finite and ≥ 0"},
		{&ColorJitter{Hue: 0.9}, "augment: ColorJitter: Hue 0.9 not in [0, 0.5]"},
		{&ColorJitter{Hue: -0.1}, "augment: ColorJitter: Hue -0.1 not in [0, 0.5]"},
		{&ColorJitter{Hue: nan}, "augment: ColorJitter: Hue NaN not in [0, 0.5]"},

		{NewRandomGrayscale(0.2), ""},
		{NewRandomGrayscale(1.01), "augment: RandomGrayscale: P 1.01 not in [0, 1]"},
		{NewRandomGrayscale(-0.5), "augment: RandomGrayscale: P -0.5 not in [0, 1]"},
	} {
		t.Run(tt.op.String(), func(t *testing.T) {
			err := tt.op.(Validator).Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				// A valid op does not fail in Apply, whatever image size it gets.
				for _, sz := range [][2]int{{1, 1}, {7, 3}, {40, 60}} {
					if _, err := tt.op.Apply(seeded(0), decodetest.Noise(1, sz[0], sz[1])); err != nil {
						t.Errorf("Apply on %dx%d: %v", sz[0], sz[1], err)
					}
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Validate() = %v, want %q...", err, tt.want)
			}
		})
	}
}

// TestApplyErrorsAreValidateErrors checks that the ops that reject bad parameters in
// Apply report the same error as Validate.
func TestApplyErrorsAreValidateErrors(t *testing.T) {
	for _, op := range []Op{
		&RandomResizedCrop{Width: 10, Height: 10, Ratio: [2]float64{2, 1}},
		&Resize{Size: -1},
		NewResizeTo(0, 3),
		NewCenterCrop(4, 0),
		&ColorJitter{Hue: 0.9},
	} {
		want := op.(Validator).Validate()
		if _, err := op.Apply(seeded(0), decodetest.Noise(1, 8, 8)); err == nil || err.Error() != want.Error() {
			t.Errorf("%v: Apply error %v, want %v", op, err, want)
		}
	}
}

func TestOutputSize(t *testing.T) {
	for _, tt := range []struct {
		op           Sizer
		w, h, ww, wh int
	}{
		{NewRandomResizedCrop(224, 200), 0, 0, 224, 200},
		{NewRandomResizedCrop(224, 200), 500, 375, 224, 200},
		{NewCenterCrop(100, 90), 0, 0, 100, 90},
		{NewCenterCrop(100, 90), 50, 60, 100, 90},
		{NewResizeTo(32, 24), 0, 0, 32, 24},
		{NewResize(256), 0, 0, 0, 0},
		{NewResize(256), 500, 0, 0, 0},
		{NewResize(256), 500, 375, 341, 256},
		{NewResize(256), 375, 500, 256, 341},
		{NewRandomHorizontalFlip(0.5), 0, 0, 0, 0},
		{NewRandomHorizontalFlip(0.5), 7, 5, 7, 5},
		{NewRandomVerticalFlip(0.5), 7, 5, 7, 5},
		{NewColorJitter(0.1, 0, 0, 0), 7, 5, 7, 5},
		{NewRandomGrayscale(0.1), 0, 0, 0, 0},
		{NewRandomGrayscale(0.1), 7, 5, 7, 5},
	} {
		if w, h := tt.op.OutputSize(tt.w, tt.h); w != tt.ww || h != tt.wh {
			t.Errorf("%v.OutputSize(%d, %d) = %d, %d; want %d, %d", tt.op, tt.w, tt.h, w, h, tt.ww, tt.wh)
		}
	}
}

// TestOutputSizeMatchesApply checks that OutputSize tells the size Apply gives.
func TestOutputSizeMatchesApply(t *testing.T) {
	for _, op := range []Op{
		NewRandomResizedCrop(24, 20), NewResize(16), NewResizeTo(9, 31), NewCenterCrop(50, 10),
		NewRandomHorizontalFlip(1), NewRandomVerticalFlip(1), NewColorJitter(0.4, 0.4, 0.4, 0.1),
		NewRandomGrayscale(1),
	} {
		for _, sz := range [][2]int{{40, 30}, {30, 40}, {16, 16}, {3, 100}} {
			out, err := op.Apply(seeded(1), decodetest.Noise(2, sz[0], sz[1]))
			if err != nil {
				t.Fatalf("%v: %v", op, err)
			}
			if w, h := op.(Sizer).OutputSize(sz[0], sz[1]); w != out.Width || h != out.Height {
				t.Errorf("%v on %dx%d: OutputSize %dx%d, Apply %dx%d", op, sz[0], sz[1], w, h, out.Width, out.Height)
			}
		}
	}
}

func TestPipelineValidate(t *testing.T) {
	train := Pipeline{NewRandomResizedCrop(224, 224), NewRandomHorizontalFlip(0.5)}
	eval := Pipeline{NewResize(256), NewCenterCrop(224, 224)}
	for _, tt := range []struct {
		name string
		p    Pipeline
		w, h int
		want string // "" for valid; else the error's start
	}{
		{"train", train, 224, 224, ""},
		{"eval", eval, 224, 224, ""},
		{"train heavy", trainPipeline(), 224, 224, ""},
		{"empty", Pipeline{}, 224, 224, ""},
		{"nil", nil, 224, 224, ""},
		{"ends with Resize", Pipeline{NewRandomHorizontalFlip(0.5), NewResize(224)}, 224, 224, ""},
		{"ends with flip", Pipeline{NewResize(256), NewRandomHorizontalFlip(0.5)}, 224, 224, ""},
		{"custom op", Pipeline{opaque{}}, 224, 224, ""},
		{"custom op after crop", Pipeline{NewCenterCrop(100, 100), opaque{}}, 224, 224, ""},
		{"crop after custom op", Pipeline{opaque{}, NewCenterCrop(224, 224)}, 224, 224, ""},
		{"Resize of a fixed size", Pipeline{NewCenterCrop(300, 200), NewResize(224)}, 336, 224, ""},
		{"no size check", Pipeline{NewCenterCrop(100, 100)}, 0, 0, ""},

		{"CenterCrop(100)", Pipeline{NewCenterCrop(100, 100)}, 224, 224,
			"augment: the ops end at 100x100 (CenterCrop(100x100)) but the batch packs 224x224"},
		{"eval too small", Pipeline{NewResize(256), NewCenterCrop(100, 100), NewRandomHorizontalFlip(0.5)}, 224, 224,
			"augment: the ops end at 100x100 (CenterCrop(100x100)) but the batch packs 224x224"},
		{"train wrong size", train, 224, 200,
			"augment: the ops end at 224x224 (RandomResizedCrop(224x224, scale=(0.08, 1), ratio=(0.75, 1.333))) but the batch packs 224x200"},
		{"Resize of a fixed size, wrong", Pipeline{NewCenterCrop(300, 200), NewResize(224)}, 224, 224,
			"augment: the ops end at 336x224 (Resize(224)) but the batch packs 224x224"},
		{"bad hue", append(trainPipeline()[:2:2], NewColorJitter(0.4, 0.4, 0.4, 0.9)), 224, 224,
			"augment: op 2 ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.9): Hue 0.9 not in [0, 0.5]"},
		{"bad user op", Pipeline{checked{errors.New("mine: bad")}}, 224, 224, "augment: op 0 checked: mine: bad"},
		{"nil op", Pipeline{NewCenterCrop(224, 224), nil}, 224, 224, "augment: op 1 is nil"},
		{"two bad ops", Pipeline{NewCenterCrop(0, 224), NewRandomGrayscale(2)}, 224, 224,
			"augment: op 0 CenterCrop(0x224): Width 0 must be positive\naugment: op 1 RandomGrayscale(p=2): P 2 not in [0, 1]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate(tt.w, tt.h)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate(%d, %d) = %v, want nil", tt.w, tt.h, err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Errorf("Validate(%d, %d) = %v, want %s", tt.w, tt.h, err, tt.want)
			}
		})
	}

	// The op's own error stays reachable.
	mine := errors.New("mine")
	if err := (Pipeline{checked{mine}}).Validate(1, 1); !errors.Is(err, mine) {
		t.Errorf("Validate = %v, does not wrap the op's error", err)
	}
	var pe *paramError
	if err := (Pipeline{&ColorJitter{Hue: 0.9}}).Validate(1, 1); !errors.As(err, &pe) || pe.Error() != "augment: ColorJitter: Hue 0.9 not in [0, 0.5]" {
		t.Errorf("Validate = %v, does not wrap the op's error", err)
	}
}

func TestLargest(t *testing.T) {
	eval := Pipeline{&Resize{Size: 256}, &CenterCrop{Width: 224, Height: 224}}
	for _, tc := range []struct {
		p        Pipeline
		inW, inH int
		w, h     int
		ok       bool
	}{
		{eval, 256, 341, 256, 341, true},
		{eval, 1, 100000, 256, 25600000, true},
		{eval, 100, 50, 512, 256, true},
		{Pipeline{NewRandomResizedCrop(224, 224), &RandomHorizontalFlip{P: 0.5}}, 4000, 3000, 224, 224, true},
		{Pipeline{&Resize{Size: 256}, opaque{}}, 10, 10, 0, 0, false},
		{eval, 0, 0, 0, 0, false},
		// A random expanding rotation is bounded (MaxSizer): by the diagonal, 141.4, where
		// the range holds 45°, else by the box at 30°, 224·(cos 30° + sin 30°) = 306.0,
		// each rounded up plus a pixel.
		{Pipeline{&RandomRotation{Degrees: [2]float64{-45, 45}, Expand: true}}, 100, 100, 143, 143, true},
		{Pipeline{NewRandomResizedCrop(224, 224), &RandomRotation{Degrees: [2]float64{-30, 30}, Expand: true}, &Resize{Width: 224, Height: 224}}, 4000, 3000, 307, 307, true},
		{Pipeline{&RandomRotation{Degrees: [2]float64{-30, 30}}, &Resize{Size: 256}}, 100, 50, 512, 256, true},
		// After a bound only MaxSizers and fixed sizes are followed: Resize of the shorter
		// side of a smaller image can be larger than that of the bound.
		{Pipeline{&RandomRotation{Degrees: [2]float64{-30, 30}, Expand: true}, &Resize{Size: 256}}, 100, 50, 0, 0, false},
		{Pipeline{&RandomRotation{Degrees: [2]float64{-30, 30}, Expand: true}, &RandomHorizontalFlip{P: 0.5}}, 100, 50, 0, 0, false},
	} {
		w, h, ok := tc.p.Largest(tc.inW, tc.inH)
		if w != tc.w || h != tc.h || ok != tc.ok {
			t.Errorf("%v.Largest(%d, %d) = %d, %d, %t; want %d, %d, %t", tc.p, tc.inW, tc.inH, w, h, ok, tc.w, tc.h, tc.ok)
		}
	}
}
