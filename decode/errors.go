package decode

import "errors"

// ErrTooLarge reports an image whose header claims more pixels than the configured limit.
// It is returned before any pixel memory is allocated.
var ErrTooLarge = errors.New("decode: image too large")

// ErrUnsupported reports bytes that are not in any recognised image format.
var ErrUnsupported = errors.New("decode: unsupported format")

// FormatError reports corrupt or truncated data in a recognised format.
type FormatError struct {
	Format string // "jpeg", "png", ...
	Err    error  // the underlying decoder's error
}

func (e *FormatError) Error() string { return "decode: corrupt " + e.Format + ": " + e.Err.Error() }

func (e *FormatError) Unwrap() error { return e.Err }
