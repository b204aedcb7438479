package objstore

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"strings"
	"time"

	"github.com/conveyor-ml/conveyor/internal/units"
)

// errStop is returned by a Download's onSize to end the download without a retry.
type stopError struct{ err error }

func (e stopError) Error() string { return e.err.Error() }

func (e stopError) Unwrap() error { return e.err }

// maxRestarts bounds how often a Download starts again from zero because the body's
// MD5 did not match its ETag, and how often attempts in a row end short at the same
// offset: such a store will not do better on the next try, and an attempt that brings
// bytes otherwise resets the attempt count, so without this bound it would never stop.
const maxRestarts = 2

// Download writes the whole object into f (from its start; f is truncated first) and
// returns its size, ETag and modification time. Failed attempts are retried
// (Retry.Attempts bounds the attempts in a row that add no byte or are abandoned as
// too slow, see Retry.MinProgressBytes); a truncated body
// resumes where it stopped with a ranged request, and a download whose MD5 does not
// match a plain (not multipart, not SSE-KMS or SSE-C) ETag starts again, at most twice;
// then, as when attempts keep ending short at the same offset, it fails for good naming
// the URL. onSize, if not nil, is called with the object's size (-1 when the response
// does not say) once per attempt before any byte is written; an error from it ends the
// download and is returned as is.
//
// The ModTime returned is the response's Last-Modified (the first one seen, kept across
// resumed attempts); a store that sends none gets a fixed time derived from the ETag, so
// that keys built from it (the WebDataset index, pixel caches) stay the same from run to
// run and change when the object does.
func (b *Bucket) Download(ctx context.Context, name string, f *os.File, onSize func(size int64) error) (Object, error) {
	obj, _, err := b.download(ctx, name, f, onSize, nil)
	return obj, err
}

// download is Download with onGrow, called with the bytes written so far whenever they
// grow while the object's size is unknown (an error from it ends the download); it also
// returns the CRC-32C of the bytes written, computed as they are written.
func (b *Bucket) download(ctx context.Context, name string, f *os.File, onSize, onGrow func(size int64) error) (Object, uint32, error) {
	key := b.root + name
	url := b.URL(name)
	if err := resetFile(f); err != nil {
		return Object{}, 0, fmt.Errorf("objstore: %s: %w", url, err)
	}
	st := &dlState{size: -1}
	var err error
	restarts, repeats := 0, 0
	lastShort := int64(-1) // where the last attempt that brought bytes but failed ended
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			b.c.retries.Add(1)
			if serr := b.sleep(ctx, attempt); serr != nil {
				return Object{}, 0, errors.Join(err, serr)
			}
		}
		st.got = 0
		err = b.downloadOnce(ctx, key, f, st, onSize, onGrow)
		end := st.off
		if err == nil {
			if err = st.verify(url); err == nil {
				if st.size < 0 {
					st.size = st.off
				}
				return withModTime(Object{Name: name, Size: st.size, ETag: st.etag, ModTime: st.modTime}), st.crc, nil
			}
			if st.badSum {
				restarts++
				if restarts > maxRestarts {
					hint := "is the ETag an MD5 of the content?"
					if st.want.alg != "" {
						hint = "no download matched the store's checksum"
					}
					return Object{}, 0, &Error{Op: "GET", URL: url, Err: fmt.Errorf("%w; gave up after %d downloads (%s)", reason(err), restarts, hint)}
				}
				if rerr := st.restart(f); rerr != nil {
					return Object{}, 0, fmt.Errorf("objstore: %s: starting again: %w", url, rerr)
				}
			}
		}
		var stop stopError
		if errors.As(err, &stop) {
			return Object{}, 0, stop.err
		}
		if st.got > 0 && !errors.Is(err, errTooSlow) {
			// An attempt that brought bytes starts the count again: Attempts bounds the
			// tries in a row that bring nothing. One that ends short where the last one
			// did (a store that ignores ranges and always cuts the body at the same
			// place) does not count as progress for long. One abandoned as too slow
			// does not count at all: a store that trickles would otherwise be retried
			// forever.
			attempt = 0
			if end == lastShort {
				repeats++
				if repeats > maxRestarts {
					return Object{}, 0, &Error{Op: "GET", URL: url, Err: fmt.Errorf("%w; %d attempts in a row ended at byte %d, giving up", reason(err), repeats+1, end)}
				}
			} else {
				repeats = 0
			}
			lastShort = end
		}
		if !retryable(err) || attempt+1 >= b.opts.Retry.Attempts || ctx.Err() != nil {
			if attempt > 0 {
				err = fmt.Errorf("%w (after %d attempts)", err, attempt+1)
			}
			return Object{}, 0, err
		}
	}
}

// reason is what an *Error says after its operation and URL, for an error that
// restates them.
func reason(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Err != nil && e.Status == 0 {
		return e.Err
	}
	return err
}

type dlState struct {
	off, size int64
	got       int64 // bytes the current attempt brought
	etag      string
	modTime   time.Time
	encrypted bool // the ETag is not an MD5 (SSE-KMS, SSE-C)
	badSum    bool // verify found the checksum or MD5 wrong
	// want is the full-object checksum the first response (from byte 0) gave, if any;
	// sum hashes the bytes written with its algorithm, or MD5 for a plain ETag; nil when
	// there is nothing to check but the length.
	want   wantSum
	sumAlg string
	sum    hash.Hash
	crc    uint32 // CRC-32C of the bytes written from byte 0 (for Cache's identity pins)
}

// begin chooses the check for a download from byte 0, from its first response.
func (st *dlState) begin(r getResult) {
	st.want, st.sum, st.sumAlg = r.sum, nil, ""
	switch {
	case r.sum.alg != "":
		st.sumAlg = r.sum.alg
	case plainMD5(r.etag) && !r.encrypted:
		st.sumAlg = "md5"
	default:
		return
	}
	st.sum = newSum(st.sumAlg)
}

// verify checks a finished download's length, then its full-object checksum, or for a
// plain ETag its MD5.
func (st *dlState) verify(url string) error {
	st.badSum = false
	if st.size >= 0 && st.off != st.size {
		return &Error{Op: "GET", URL: url, Err: fmt.Errorf("%w: got %d of %d bytes", ErrTruncated, st.off, st.size)}
	}
	if st.sum == nil {
		return nil
	}
	got := st.sum.Sum(nil)
	want, name := st.want.want, "checksum "+strings.ToUpper(st.sumAlg)
	if st.sumAlg == "md5" {
		want, _ = hex.DecodeString(st.etag)
		name = "MD5 (the ETag)"
	}
	if !bytes.Equal(got, want) {
		st.badSum = true
		return &Error{Op: "GET", URL: url, Err: fmt.Errorf("%w: %s is %s, the store says %s", ErrTruncated, name, showSum(st.sumAlg, got), showSum(st.sumAlg, want))}
	}
	return nil
}

func (st *dlState) restart(f *os.File) error {
	st.off, st.size, st.etag, st.modTime, st.crc = 0, -1, "", time.Time{}, 0
	st.want, st.sum, st.sumAlg = wantSum{}, nil, ""
	return resetFile(f)
}

func resetFile(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.Seek(0, io.SeekStart)
	return err
}

// plainMD5 reports whether an ETag looks like an MD5 of the content: 32 hex digits.
// Multipart ETags end in -N and are checked by length only. SSE-KMS and SSE-C ETags on
// AWS also have 32 hex digits but are not MD5s: the response's encryption headers tell
// those apart (getResult.encrypted).
func plainMD5(etag string) bool {
	if len(etag) != 32 {
		return false
	}
	for _, c := range etag {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (b *Bucket) downloadOnce(ctx context.Context, key string, f *os.File, st *dlState, onSize, onGrow func(int64) error) error {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The watchdog abandons an attempt that gets no headers, or no body bytes, for
	// AttemptTimeout: a connection that stalls without closing is retried.
	wd := time.AfterFunc(b.opts.Retry.AttemptTimeout, cancel)
	defer wd.Stop()
	b.c.requests.Add(1)
	body, r, err := b.be.get(actx, key, st.off)
	if err != nil {
		if ctx.Err() == nil && actx.Err() != nil {
			return &Error{Op: "GET", URL: b.be.url(key), Err: fmt.Errorf("no response in %v: %w", b.opts.Retry.AttemptTimeout, context.DeadlineExceeded)}
		}
		return err
	}
	defer body.Close()
	if st.size >= 0 && (r.etag != st.etag || r.size != st.size) {
		// The object changed between attempts: start again from zero.
		if err := st.restart(f); err != nil {
			return stopError{fmt.Errorf("objstore: %s: starting again: %w", b.be.url(key), err)}
		}
		return &Error{Op: "GET", URL: b.be.url(key), Err: fmt.Errorf("%w: object changed during the download", ErrTruncated)}
	}
	if r.start != st.off {
		// The store ignored the range: take the whole body again.
		if err := st.restart(f); err != nil {
			return stopError{fmt.Errorf("objstore: %s: starting again: %w", b.be.url(key), err)}
		}
	}
	st.size, st.etag, st.encrypted = r.size, r.etag, r.encrypted
	if st.off == 0 {
		st.begin(r) // this response starts at byte 0: nothing hashed yet
	}
	if st.modTime.IsZero() {
		st.modTime = r.modTime
	}
	if onSize != nil {
		if err := onSize(r.size); err != nil {
			return stopError{err}
		}
	}
	var w io.Writer = f
	if st.sum != nil {
		w = io.MultiWriter(f, st.sum)
	}
	buf := make([]byte, 256<<10)
	var got int64
	// The watchdog sees silence only: a body that sends a byte now and then resets it
	// forever. Each ProgressInterval must also bring MinProgressBytes. It is checked as
	// reads return, which the watchdog bounds, so it needs no timer of its own.
	p := &b.opts.Retry
	since, window := time.Now(), int64(0)
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			wd.Reset(p.AttemptTimeout)
			if r.size < 0 && onGrow != nil {
				if err := onGrow(st.off + int64(n)); err != nil {
					return stopError{err}
				}
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				return stopError{fmt.Errorf("objstore: %s: writing the cache file: %w", b.be.url(key), werr)}
			}
			st.crc = crc32.Update(st.crc, castagnoli, buf[:n])
			st.off += int64(n)
			st.got += int64(n)
			got += int64(n)
			window += int64(n)
			b.c.bytes.Add(int64(n))
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if ctx.Err() == nil && actx.Err() != nil {
				rerr = fmt.Errorf("body stalled for %v: %w", p.AttemptTimeout, context.DeadlineExceeded)
			}
			return &Error{Op: "GET", URL: b.be.url(key), Err: rerr}
		}
		if el := time.Since(since); el >= p.ProgressInterval {
			if window < p.MinProgressBytes {
				return &Error{Op: "GET", URL: b.be.url(key), Err: fmt.Errorf("%w: %s in %v; the minimum is %s every %v",
					errTooSlow, units.Bytes(window), el.Round(time.Millisecond), units.Bytes(p.MinProgressBytes), p.ProgressInterval)}
			}
			since, window = time.Now(), 0
		}
	}
	if r.length >= 0 && got != r.length {
		return &Error{Op: "GET", URL: b.be.url(key), Err: fmt.Errorf("%w: body of %d bytes, Content-Length %d", ErrTruncated, got, r.length)}
	}
	return nil
}
