package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"syscall"
	"time"
)

// ErrTruncated is wrapped by an attempt whose body ended before its length, or whose
// checksum did not match; it is retried.
var ErrTruncated = errors.New("objstore: truncated or corrupt body")

// errTooSlow is wrapped by a GET abandoned for bringing less than
// Retry.MinProgressBytes in a Retry.ProgressInterval; it is retried.
var errTooSlow = errors.New("too slow")

// ErrTooLarge is returned when an object is larger than the cache's whole byte limit, or
// than the limit a capped download was given (Bucket.DownloadMax, Mirror).
var ErrTooLarge = errors.New("objstore: object larger than the cache limit")

// ErrChanged is wrapped by a [ShardCache] fetch of an object whose size, ETag or CRC-32C
// differs from the first fetch's or from what [ShardCache.Expect] said: the object was
// replaced in the store since it was indexed (or a byte of it changed at rest or on
// the way), and offsets taken from the old version would read the wrong bytes. The
// next Open fetches it again once; after a second refusal in a row the cache refuses
// it without fetching.
var ErrChanged = errors.New("objstore: object changed since it was first fetched (and indexed)")

// ErrNoUploadList is wrapped by [Bucket.Uploads] when the store answers the listing of
// multipart uploads with 404 NoSuchUpload, as gofakes3 does in a bucket without
// uploads: no upload can be found or aborted there. [Bucket.Put] takes it as "no upload
// to resume".
var ErrNoUploadList = errors.New("objstore: the store does not list multipart uploads")

// An Error is a request that failed for good: the object's URL, the operation and, when
// the server answered, its HTTP status. It matches [fs.ErrNotExist] for 404 and
// [fs.ErrPermission] for 401 and 403, and [fs.ErrExist] for 412 (a [Bucket.Create] of an
// object that exists), with errors.Is.
type Error struct {
	Op     string // "GET", "HEAD", "LIST", "PUT"
	URL    string // the object, s3://bucket/key or https://host/path
	Status int    // HTTP status; 0 when none came back
	Code   string // the store's error code (NoSuchKey, AccessDenied, SlowDown), if any
	Err    error
	hint   string // what to check, when the failure suggests a setting is missing
}

func (e *Error) Error() string {
	s := "objstore: " + e.Op + " " + e.URL
	switch {
	case e.Status == http.StatusNotFound:
		s += ": not found"
	case e.Status == http.StatusForbidden || e.Status == http.StatusUnauthorized:
		s += ": access denied (check the AWS credentials, profile and region)"
	case e.Status == http.StatusPreconditionFailed:
		s += ": already exists"
	case e.Status != 0:
		s += fmt.Sprintf(": HTTP %d", e.Status)
	}
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.hint != "" {
		s += " (" + e.hint + ")"
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, fs.ErrNotExist) and fs.ErrPermission work.
func (e *Error) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return e.Status == http.StatusNotFound
	case fs.ErrPermission:
		return e.Status == http.StatusForbidden || e.Status == http.StatusUnauthorized
	case fs.ErrExist:
		return e.Status == http.StatusPreconditionFailed
	}
	return false
}

// retryable decides whether an attempt's error is worth another try: throttling, server
// errors, timeouts, resets, truncated bodies and uploads whose body the store found
// changed are; a missing object, refused or missing credentials, a host name that does
// not exist, other client errors and cancellation are not.
func retryable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	// No credentials to sign with anywhere, or a host name that does not exist: the next
	// attempt would fail the same way, after a backoff the user waits through.
	var ce *credentialsError
	if errors.As(err, &ce) {
		return !ce.final // a source failing for a moment is tried again
	}
	if dnsNotFound(err) {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		switch {
		case e.Status >= 500, e.Status == http.StatusTooManyRequests, e.Status == http.StatusRequestTimeout:
			return true
		case e.Code == "SlowDown", e.Code == "Throttling", e.Code == "ThrottlingException",
			e.Code == "RequestTimeout", e.Code == "RequestTimeTooSkewed", e.Code == "InternalError":
			return true
		case e.Code == "BadDigest", e.Code == "XAmzContentSHA256Mismatch", e.Code == "InvalidDigest":
			// An upload whose body does not hash to what was signed or sent: a byte
			// changed in transit. The next attempt sends the body again.
			return true
		case e.Status >= 400:
			return false
		}
		// No status: a transport error; look at what is inside.
	}
	if errors.Is(err, ErrTruncated) || errors.Is(err, errTooSlow) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	// Anything else without an HTTP status is a transport failure of some other kind
	// (TLS, a proxy, a closed idle connection): retrying is cheap and bounded.
	return e != nil && e.Status == 0
}

// RetryPolicy is how failed attempts are retried: up to Attempts tries in all, sleeping
// a random time in [0, min(MaxDelay, BaseDelay·2ⁿ)) before try n+1 ("full jitter", which
// spreads the retries of many ranks hit by the same throttling).
type RetryPolicy struct {
	// Attempts is the number of tries per request, the first included. Default 10.
	Attempts int
	// BaseDelay is the backoff before the first retry's jitter. Default 100ms.
	BaseDelay time.Duration
	// MaxDelay caps the backoff. Default 10s.
	MaxDelay time.Duration
	// AttemptTimeout bounds a GET's wait for response headers and any pause between
	// two reads of its body (a stalled connection is abandoned and retried), and is the
	// deadline of every other request: one page of a listing; an upload's PUT or part
	// gets AttemptTimeout plus its size at 256 KiB/s. Default 60s.
	AttemptTimeout time.Duration
	// MinProgressBytes is the least a GET's body must bring in every ProgressInterval
	// after its headers: a body that trickles (a byte now and then keeps AttemptTimeout
	// from firing) is abandoned as too slow and retried from where it stopped. Attempts
	// abandoned so count as attempts that brought nothing, so a store that only
	// trickles fails after Retry.Attempts of them, naming the URL and the bytes it sent
	// in how long. The other requests have whole-request deadlines (AttemptTimeout, an
	// upload's size at 256 KiB/s) and need no such rule. Default 256 KiB, which with the
	// default interval is about 4 KiB/s: a slow link passes it many times over.
	MinProgressBytes int64
	// ProgressInterval is the period over which MinProgressBytes is counted. Default
	// 60s.
	ProgressInterval time.Duration
}

// EnsureDefaults fills p's zero fields with their defaults and returns p; a nil p
// becomes a new RetryPolicy holding the defaults.
func (p *RetryPolicy) EnsureDefaults() *RetryPolicy {
	if p == nil {
		p = &RetryPolicy{}
	}
	if p.Attempts == 0 {
		p.Attempts = 10
	}
	if p.BaseDelay == 0 {
		p.BaseDelay = 100 * time.Millisecond
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = 10 * time.Second
	}
	if p.AttemptTimeout == 0 {
		p.AttemptTimeout = 60 * time.Second
	}
	if p.MinProgressBytes == 0 {
		p.MinProgressBytes = 256 << 10
	}
	if p.ProgressInterval == 0 {
		p.ProgressInterval = 60 * time.Second
	}
	return p
}

// Validate reports every invalid field of p, defaults filled (see EnsureDefaults),
// joined into one error; nil when all are valid.
func (p *RetryPolicy) Validate() error {
	var errs []error
	if p.Attempts < 1 {
		errs = append(errs, fmt.Errorf("objstore: Retry.Attempts %d: want at least 1", p.Attempts))
	}
	if p.BaseDelay < 0 {
		errs = append(errs, fmt.Errorf("objstore: Retry.BaseDelay %v is negative", p.BaseDelay))
	}
	if p.MaxDelay < p.BaseDelay {
		errs = append(errs, fmt.Errorf("objstore: Retry.MaxDelay %v is below Retry.BaseDelay %v", p.MaxDelay, p.BaseDelay))
	}
	if p.AttemptTimeout < 0 {
		errs = append(errs, fmt.Errorf("objstore: Retry.AttemptTimeout %v is negative", p.AttemptTimeout))
	}
	if p.MinProgressBytes < 0 {
		errs = append(errs, fmt.Errorf("objstore: Retry.MinProgressBytes %d is negative", p.MinProgressBytes))
	}
	if p.ProgressInterval < 0 {
		errs = append(errs, fmt.Errorf("objstore: Retry.ProgressInterval %v is negative", p.ProgressInterval))
	}
	return errors.Join(errs...)
}
