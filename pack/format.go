package pack

import (
	"fmt"
	"strings"
)

// Layout is the order of a packed sample's values.
type Layout int

const (
	// NCHW stores three planes, red then green then blue, each row by row (PyTorch's
	// channels-first order).
	NCHW Layout = iota
	// NHWC stores pixels row by row with their three channels together.
	NHWC
)

func (l Layout) String() string {
	switch l {
	case NCHW:
		return "NCHW"
	case NHWC:
		return "NHWC"
	}
	return fmt.Sprintf("Layout(%d)", int(l))
}

// ParseLayout parses "NCHW" or "NHWC", in any case.
func ParseLayout(s string) (Layout, error) {
	switch strings.ToUpper(s) {
	case "NCHW":
		return NCHW, nil
	case "NHWC":
		return NHWC, nil
	}
	return 0, fmt.Errorf("pack: unknown layout %q (want NCHW or NHWC)", s)
}

// MarshalText implements encoding.TextMarshaler, for configuration files.
func (l Layout) MarshalText() ([]byte, error) {
	if l != NCHW && l != NHWC {
		return nil, fmt.Errorf("pack: invalid %v", l)
	}
	return []byte(l.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseLayout.
func (l *Layout) UnmarshalText(b []byte) error {
	v, err := ParseLayout(string(b))
	if err == nil {
		*l = v
	}
	return err
}

// DType is the element type of a packed sample. The zero value is Float32.
type DType int

const (
	Float32  DType = iota // IEEE binary32
	Uint8                 // the raw 8-bit pixel values
	Float16               // IEEE binary16, rounded to nearest even from the float32 value
	BFloat16              // bfloat16, rounded to nearest even from the float32 value
)

func (d DType) String() string {
	switch d {
	case Uint8:
		return "uint8"
	case Float32:
		return "float32"
	case Float16:
		return "float16"
	case BFloat16:
		return "bfloat16"
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// Size returns the bytes per element, or 0 for an invalid DType.
func (d DType) Size() int {
	switch d {
	case Uint8:
		return 1
	case Float16, BFloat16:
		return 2
	case Float32:
		return 4
	}
	return 0
}

// ParseDType parses a dtype name as String writes it, in any case, or one of the usual
// aliases: u8, f32/fp32/float, f16/fp16/half, bf16.
func ParseDType(s string) (DType, error) {
	switch strings.ToLower(s) {
	case "uint8", "u8":
		return Uint8, nil
	case "float32", "f32", "fp32", "float":
		return Float32, nil
	case "float16", "f16", "fp16", "half":
		return Float16, nil
	case "bfloat16", "bf16":
		return BFloat16, nil
	}
	return 0, fmt.Errorf("pack: unknown dtype %q (want uint8, float32, float16 or bfloat16)", s)
}

// MarshalText implements encoding.TextMarshaler, for configuration files.
func (d DType) MarshalText() ([]byte, error) {
	if d.Size() == 0 {
		return nil, fmt.Errorf("pack: invalid %v", d)
	}
	return []byte(d.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseDType.
func (d *DType) UnmarshalText(b []byte) error {
	v, err := ParseDType(string(b))
	if err == nil {
		*d = v
	}
	return err
}
