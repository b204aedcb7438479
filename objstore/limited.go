package objstore

import (
	"context"
	"fmt"
	"os"

	"github.com/conveyor-ml/conveyor/internal/units"
)

// DownloadMax is Download for an object that may hold at most limit bytes, such as a
// dataset's description, read before anything can check it: a larger one fails with an
// error wrapping ErrTooLarge that names the URL, having written at most limit bytes to f.
// A response that states a larger size is refused before its body is read; one of unknown
// size (chunked, or a server that streams without end) is refused as its bytes pass limit.
func (b *Bucket) DownloadMax(ctx context.Context, name string, f *os.File, limit int64) (Object, error) {
	tooLarge := func(what string) error {
		return &Error{Op: "GET", URL: b.URL(name), Err: &tooLargeError{fmt.Sprintf("%s the %s it may hold", what, units.Bytes(limit))}}
	}
	onSize := func(size int64) error {
		if size > limit {
			return tooLarge(fmt.Sprintf("%s, more than", units.Bytes(size)))
		}
		return nil
	}
	onGrow := func(size int64) error {
		if size > limit {
			return tooLarge("a response of unknown size went past")
		}
		return nil
	}
	obj, _, err := b.download(ctx, name, f, onSize, onGrow)
	return obj, err
}

// tooLargeError is an object larger than a limit that is not the cache's: it matches
// ErrTooLarge with errors.Is and says which limit.
type tooLargeError struct{ msg string }

func (e *tooLargeError) Error() string        { return "object too large: " + e.msg }
func (e *tooLargeError) Is(target error) bool { return target == ErrTooLarge }
