package augment

import (
	"errors"
	"fmt"
	"math"
)

// Validator is an optional interface of an Op: Validate reports parameters that Apply
// would reject for every image, or that torchvision rejects when the transform is built,
// so that a loader can refuse a bad pipeline before its first sample instead of failing
// (or skipping) every sample. An op whose Validate returns nil does not fail in Apply on
// parameter grounds; it may still fail on a particular image (an empty one, say).
//
// Every op of this package implements it; the error names the op and the field, as in
// "augment: ColorJitter: Hue 0.9 not in [0, 0.5]".
type Validator interface {
	Validate() error
}

// Sizer is an optional interface of an Op: OutputSize returns the size of the image Apply
// returns for a width×height input, without an image. A size of 0 (along either side)
// means unknown: the input's size is unknown before the first image, and an op whose
// output depends on an unknown input returns 0, 0. Ops with a fixed output size
// (RandomResizedCrop, CenterCrop, Resize to Width×Height) return it whatever the input;
// Resize of the shorter side needs the input's size; flips and colour ops return their
// input's size.
//
// Pipeline.Validate uses it to check the chain's final size, and Pipeline.Largest to size
// the ops' buffers. The result need only be right for parameters that pass Validate. An op
// whose size varies with its draws returns 0, 0 and may implement MaxSizer to bound it.
type Sizer interface {
	OutputSize(width, height int) (w, h int)
}

// Validate checks p before any sample: it calls Validate on every op that implements
// Validator, and, where the ops' output size can be told without an image (every op from
// the one that fixes it onwards implements Sizer), checks that it is width×height, the
// size the batch packs. Errors name the op by its index in p and its String, as in
// "augment: op 2 ColorJitter(...): Hue 0.9 not in [0, 0.5]"; several are joined.
//
// TensorOps (RandomErasing) must come after every image op: an image op after one is an
// error.
//
// Validate cannot know what an op that implements neither interface does and accepts it.
// When the final size depends on the image, as after Resize of the shorter side or an op
// without OutputSize, or when p is empty, Validate passes, and the loader still checks
// every sample's size when it packs it. A width or height ≤ 0 skips the size check.
func (p Pipeline) Validate(width, height int) error {
	var errs []error
	tensor := -1 // the first TensorOp
	for i, op := range p {
		if op == nil {
			errs = append(errs, fmt.Errorf("augment: op %d is nil", i))
			continue
		}
		if _, ok := op.(TensorOp); ok && tensor < 0 {
			tensor = i
		} else if !ok && tensor >= 0 {
			errs = append(errs, fmt.Errorf("augment: op %d %v follows op %d %v, which runs on the packed sample: image ops must come before it", i, op, tensor, p[tensor]))
		}
		v, ok := op.(Validator)
		if !ok {
			continue
		}
		if err := v.Validate(); err != nil {
			msg := err.Error()
			var pe *paramError
			if errors.As(err, &pe) {
				msg = pe.msg // the op is named below
			}
			errs = append(errs, &opError{fmt.Sprintf("augment: op %d %v: %s", i, op, msg), err})
		}
	}
	if len(errs) > 0 || width <= 0 || height <= 0 {
		return errors.Join(errs...)
	}
	w, h := 0, 0 // unknown before the first image
	var last Op  // the op that last set or changed the size
	for _, op := range p {
		s, ok := op.(Sizer)
		if !ok {
			w, h = 0, 0
			continue
		}
		nw, nh := s.OutputSize(w, h)
		if nw <= 0 || nh <= 0 {
			nw, nh = 0, 0
		}
		if nw != w || nh != h {
			last = op
		}
		w, h = nw, nh
	}
	if w > 0 && (w != width || h != height) {
		return fmt.Errorf("augment: the ops end at %dx%d (%v) but the batch packs %dx%d", w, h, last, width, height)
	}
	return nil
}

// MaxSizer is an optional interface of an Op whose output size varies with its draws, such
// as RandomRotation with Expand, whose Sizer answer is then 0, 0 (unknown): MaxOutputSize
// returns a size that no image Apply returns exceeds, along either side, for any input of
// at most width×height (each side). It may be larger than any image Apply makes, but never
// smaller. Pipeline.Largest uses it, so that a loader can still reserve the ops' memory;
// Pipeline.Validate does not, since a bound is not the size the batch packs.
type MaxSizer interface {
	MaxOutputSize(width, height int) (w, h int)
}

// Largest returns the largest image, by pixel count, that any op of p produces from a
// width×height input, or a bound on it, for a loader to reserve memory before running
// them. An op that implements MaxSizer contributes its bound; after an op whose size is
// only bounded, each later op must implement MaxSizer too or have a fixed output size (a
// Sizer whose OutputSize(0, 0) is known, as crops and Resize to Width×Height), since an
// op's exact size for the bound need not bound its size for a smaller input (Resize of the
// shorter side). ok is false when the size cannot be told or bounded without running the
// ops: an op that implements neither Sizer nor MaxSizer, one that does not follow a bound
// as above, or an input size of 0.
func (p Pipeline) Largest(width, height int) (w, h int, ok bool) {
	cw, ch := width, height
	bounded := false // cw×ch bounds the current size rather than being it
	for _, op := range p {
		if cw <= 0 || ch <= 0 {
			return 0, 0, false
		}
		s, isSizer := op.(Sizer)
		if m, isMax := op.(MaxSizer); isMax {
			mw, mh := m.MaxOutputSize(cw, ch)
			if isSizer && !bounded {
				// Exact when the op's size does not vary (RandomRotation without Expand).
				ew, eh := s.OutputSize(cw, ch)
				bounded = ew != mw || eh != mh
			} else {
				bounded = true
			}
			cw, ch = mw, mh
		} else if !isSizer {
			return 0, 0, false
		} else if !bounded {
			cw, ch = s.OutputSize(cw, ch)
		} else if fw, fh := s.OutputSize(0, 0); fw > 0 && fh > 0 {
			cw, ch, bounded = fw, fh, false // a fixed size, whatever the input
		} else {
			return 0, 0, false
		}
		if cw <= 0 || ch <= 0 {
			return 0, 0, false
		}
		if int64(cw)*int64(ch) > int64(w)*int64(h) {
			w, h = cw, ch
		}
	}
	return w, h, true
}

// paramError is an invalid parameter of an op: Error gives "augment: Op: msg", and
// Pipeline.Validate, which names the op itself, msg alone.
type paramError struct {
	op, msg string
}

func (e *paramError) Error() string { return "augment: " + e.op + ": " + e.msg }

func paramErrorf(op, format string, args ...any) error {
	return &paramError{op, fmt.Sprintf(format, args...)}
}

// opError is an op's Validate error as Pipeline.Validate reports it.
type opError struct {
	msg string
	err error
}

func (e *opError) Error() string { return e.msg }
func (e *opError) Unwrap() error { return e.err }

// checkPositive reports a size that is not positive.
func checkPositive(op, field string, v int) error {
	if v <= 0 {
		return paramErrorf(op, "%s %d must be positive", field, v)
	}
	return nil
}

// checkProbability reports a probability outside [0, 1] (or NaN).
func checkProbability(op string, p float64) error {
	if !(p >= 0 && p <= 1) {
		return paramErrorf(op, "P %g not in [0, 1]", p)
	}
	return nil
}

// orDefault returns r, or d when r is zero (an unset range).
func orDefault(r, d [2]float64) [2]float64 {
	if r == [2]float64{} {
		return d
	}
	return r
}

// isFinite reports whether v is neither infinite nor NaN.
func isFinite(v float64) bool { return !math.IsInf(v, 0) && !math.IsNaN(v) }
