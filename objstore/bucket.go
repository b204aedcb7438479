package objstore

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/fnv"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conveyor-ml/conveyor/internal/units"
)

// An Object is one stored object: its name under the bucket's root, size and ETag
// (empty where the store has none, as for local files), and when it was last modified.
type Object struct {
	Name string
	Size int64
	ETag string
	// ModTime is the object's Last-Modified time (a local file's modification time).
	// Stat and Download fill it; where the store gives none, it is a fixed time derived
	// from the ETag (see [Bucket.Download]), so it changes only when the object does.
	ModTime time.Time
}

// etagTime stands in for a missing Last-Modified: a time in 1970-2038 taken from a hash
// of the ETag, the same on every node and run, different when the object changes. It is
// the zero time when there is no ETag either.
func etagTime(etag string) time.Time {
	if etag == "" {
		return time.Time{}
	}
	h := fnv.New64a()
	h.Write([]byte(etag))
	return time.Unix(int64(h.Sum64()%(1<<31)), 0).UTC()
}

func withModTime(o Object) Object {
	if o.ModTime.IsZero() {
		o.ModTime = etagTime(o.ETag)
	}
	return o
}

// Options configures how a [Bucket] reaches its store. A nil *Options means defaults.
type Options struct {
	// Retry is how failed requests are retried. Default: see [RetryPolicy].
	Retry RetryPolicy
	// Endpoint is the S3 endpoint URL of an S3-compatible store (MinIO, Ceph, R2,
	// https://storage.googleapis.com). Default: the AWS configuration's
	// (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, endpoint_url in the profile), else AWS.
	Endpoint string
	// Region is the S3 region. Default: the AWS configuration's (AWS_REGION, the
	// profile), else us-east-1.
	Region string
	// VirtualHosted addresses buckets as bucket.host instead of host/bucket when an
	// endpoint is set (AWS itself is always virtual-hosted). Default false: path-style,
	// which every S3-compatible store accepts.
	VirtualHosted bool
	// PartSize is the part size of S3 multipart uploads; Put sends objects up to it
	// in one request. At least 5 MiB (S3's minimum). Default 64 MiB.
	PartSize int64
	// MaxConns bounds the open connections per host. Default 64.
	MaxConns int
	// MaxListPages bounds the pages of one listing (S3 returns up to 1000 keys a
	// page): a store that keeps answering with another page, or with a continuation
	// token it gave before (which ends a listing at once), would otherwise be listed
	// forever. A listing that reaches it fails naming the URL. Default 10000, ten
	// million keys.
	MaxListPages int
	// HTTPClient makes every request (S3 and HTTPS); its Transport is used as given.
	// Default: a client built from http.DefaultTransport with MaxConns and
	// Retry.AttemptTimeout as the response-header timeout (for S3, the SDK's buildable
	// client, so AWS_CA_BUNDLE and ca_bundle in the profile are honoured; a client given
	// here cannot take them).
	HTTPClient *http.Client
}

func (o *Options) clone() Options {
	if o == nil {
		return Options{}
	}
	return *o
}

// EnsureDefaults fills o's zero fields with their defaults and returns o; a nil o
// becomes a new Options holding the defaults.
func (o *Options) EnsureDefaults() *Options {
	if o == nil {
		o = &Options{}
	}
	o.Retry.EnsureDefaults()
	if o.MaxConns == 0 {
		o.MaxConns = 64
	}
	if o.PartSize == 0 {
		o.PartSize = 64 << 20
	}
	if o.MaxListPages == 0 {
		o.MaxListPages = 10000
	}
	return o
}

// tune sets up a transport for shard traffic.
func (o *Options) tune(t *http.Transport) {
	t.MaxConnsPerHost = o.MaxConns
	t.MaxIdleConnsPerHost = o.MaxConns
	t.ResponseHeaderTimeout = o.Retry.AttemptTimeout
	// Shards are already compressed; gzip would only cost CPU and hide lengths.
	t.DisableCompression = true
}

// httpClient is the client for HTTP(S) buckets; own is its transport when made here.
func (o *Options) httpClient() (c *http.Client, own *http.Transport) {
	if o.HTTPClient != nil {
		return o.HTTPClient, nil
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	o.tune(t)
	return &http.Client{Transport: t}, t
}

// Validate reports every invalid field of o, defaults filled (see EnsureDefaults),
// joined into one error; nil when all are valid.
func (o *Options) Validate() error {
	errs := []error{o.Retry.Validate()}
	if o.PartSize < 5<<20 {
		errs = append(errs, fmt.Errorf("objstore: Options.PartSize %d: S3 parts are at least 5 MiB", o.PartSize))
	}
	if o.MaxConns < 1 {
		errs = append(errs, fmt.Errorf("objstore: Options.MaxConns %d: want at least 1", o.MaxConns))
	}
	if o.MaxListPages < 1 {
		errs = append(errs, fmt.Errorf("objstore: Options.MaxListPages %d: want at least 1", o.MaxListPages))
	}
	if o.Endpoint != "" {
		if l, err := ParseURL(o.Endpoint); err != nil || (l.Scheme != "http" && l.Scheme != "https") {
			errs = append(errs, fmt.Errorf("objstore: Options.Endpoint %q: want an http:// or https:// URL", o.Endpoint))
		}
	}
	return errors.Join(errs...)
}

// String prints the effective options.
func (o Options) String() string {
	ep := o.Endpoint
	if ep == "" {
		ep = "(AWS config)"
	}
	return fmt.Sprintf("objstore.Options{Endpoint: %s, Region: %q, VirtualHosted: %v, PartSize: %d, MaxConns: %d, MaxListPages: %d, Retry: {Attempts: %d, BaseDelay: %v, MaxDelay: %v, AttemptTimeout: %v, MinProgressBytes: %d, ProgressInterval: %v}}",
		ep, o.Region, o.VirtualHosted, o.PartSize, o.MaxConns, o.MaxListPages, o.Retry.Attempts, o.Retry.BaseDelay, o.Retry.MaxDelay, o.Retry.AttemptTimeout, o.Retry.MinProgressBytes, o.Retry.ProgressInterval)
}

// backend is one kind of store making single attempts; keys are full keys or paths.
type backend interface {
	url(key string) string
	// get returns the object's bytes from off (or from 0 when the store ignores
	// ranges: start says which), the object's total size and ETag, and the body's
	// length (-1 when unknown).
	get(ctx context.Context, key string, off int64) (body io.ReadCloser, r getResult, err error)
	stat(ctx context.Context, key string) (Object, error)
	// list returns the objects whose full keys start with prefix, full keys as names.
	list(ctx context.Context, prefix string) ([]Object, error)
}

type getResult struct {
	start, length, size int64
	etag                string
	modTime             time.Time // Last-Modified; zero when not given
	// encrypted says the ETag is not the body's MD5 even if it looks like one:
	// SSE-KMS and SSE-C objects on AWS (x-amz-server-side-encryption: aws:kms, or the
	// SSE-C customer-algorithm header).
	encrypted bool
	// sum is the object's full-object checksum, from a response starting at byte 0 that
	// carries one.
	sum wantSum
}

// sseNotMD5 reports whether server-side-encryption response headers mean the ETag is
// not an MD5 of the content.
func sseNotMD5(sse, customerAlgorithm string) bool {
	return strings.HasPrefix(sse, "aws:kms") || customerAlgorithm != ""
}

// timedLister is a backend whose list bounds each request itself (S3 pages) or needs no
// bound (local directories), so the listing is not run inside one attempt's deadline.
type timedLister interface {
	listEach(ctx context.Context, prefix string, do func(context.Context, func(context.Context) error) error) ([]Object, error)
}

// putter is a backend that can store objects.
type putter interface {
	put(ctx context.Context, key string, r io.ReaderAt, size int64, c *counters) error
}

// partTimeout bounds one upload request of n bytes: AttemptTimeout for the request to
// start and answer, plus the time to send n bytes at 256 KiB/s (64 MiB: 4m16s more), a
// floor slow enough for a congested link but finite for a dead one.
func (o *Options) partTimeout(n int64) time.Duration {
	return o.Retry.AttemptTimeout + time.Duration(n)*time.Second/(256<<10)
}

type counters struct {
	requests, bytes, retries, uploaded atomic.Int64
}

// A Bucket is a dataset's root in one store: a local directory, an S3 bucket and key
// prefix, or an HTTP(S) base URL. Names are relative to the root and use '/'. A Bucket
// is safe for concurrent use.
type Bucket struct {
	root string // key prefix, directory or URL path, ending in '/' unless empty
	loc  Location
	be   backend
	opts Options
	c    counters

	mu   sync.Mutex
	owns []*http.Transport // transports made here, closed by Close
}

// OpenBucket opens the store under a root URL (no braces or globs): a local directory,
// s3://bucket/prefix/ or https://host/path/. It makes no request: a bad bucket or
// credentials show in the first Stat, List or Download, naming the URL.
func OpenBucket(ctx context.Context, rootURL string, opts *Options) (*Bucket, error) {
	loc, err := ParseURL(rootURL)
	if err != nil {
		return nil, err
	}
	if strings.ContainsAny(loc.Path, "{}") || hasGlob(loc.Path) {
		return nil, fmt.Errorf("objstore: OpenBucket %q: a root may not hold braces or globs (use Resolve)", rootURL)
	}
	return openBucket(ctx, loc, opts)
}

func openBucket(ctx context.Context, loc Location, opts *Options) (*Bucket, error) {
	o := opts.clone()
	if err := o.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	b := &Bucket{loc: loc, opts: o}
	switch loc.Scheme {
	case "file":
		b.root = loc.Path
		if b.root != "" && !strings.HasSuffix(b.root, "/") {
			b.root += "/"
		}
		b.be = localBackend{}
	case "s3":
		b.root = loc.Path
		if b.root != "" && !strings.HasSuffix(b.root, "/") {
			b.root += "/"
		}
		be, err := newS3Backend(ctx, loc.Host, &o, b.own)
		if err != nil {
			return nil, err
		}
		be.do, be.doTimeout, be.partTimeout = b.do, b.doTimeout, b.opts.partTimeout
		b.be = be
	case "http", "https":
		b.root = loc.Path
		if !strings.HasSuffix(b.root, "/") {
			b.root += "/"
		}
		client, own := o.httpClient()
		if own != nil {
			b.owns = append(b.owns, own)
		}
		b.be = &httpBackend{base: loc.Scheme + "://" + loc.Host, query: loc.Query, client: client}
	}
	return b, nil
}

func (b *Bucket) own(t *http.Transport) {
	b.mu.Lock()
	b.owns = append(b.owns, t)
	b.mu.Unlock()
}

// Close closes the idle connections of the HTTP transport the bucket made (none when
// Options.HTTPClient was given). Requests may still be made afterwards.
func (b *Bucket) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range b.owns {
		t.CloseIdleConnections()
	}
	return nil
}

// String names the bucket's root as a URL.
func (b *Bucket) String() string {
	l := b.loc
	l.Path = b.root
	return l.String()
}

// Local returns the root directory when the bucket is on the local file system.
func (b *Bucket) Local() (dir string, ok bool) {
	if b.loc.Scheme != "file" {
		return "", false
	}
	if b.root == "" {
		return ".", true
	}
	return b.root, true
}

// URL names an object for messages and logs.
func (b *Bucket) URL(name string) string { return b.be.url(b.root + name) }

// Stats returns the bucket's request counters (the cache fields are zero).
func (b *Bucket) Stats() Stats {
	return Stats{
		Requests:      b.c.requests.Load(),
		BytesFetched:  b.c.bytes.Load(),
		Retries:       b.c.retries.Load(),
		BytesUploaded: b.c.uploaded.Load(),
	}
}

// do runs op with the retry policy, each attempt within AttemptTimeout; op's error decides.
func (b *Bucket) do(ctx context.Context, op func(context.Context) error) error {
	return b.doTimeout(ctx, b.opts.Retry.AttemptTimeout, op)
}

// doTimeout runs op with the retry policy, each attempt within timeout.
func (b *Bucket) doTimeout(ctx context.Context, timeout time.Duration, op func(context.Context) error) error {
	var err error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			b.c.retries.Add(1)
			if serr := b.sleep(ctx, attempt); serr != nil {
				return errors.Join(err, serr)
			}
		}
		actx, cancel := context.WithTimeout(ctx, timeout)
		b.c.requests.Add(1)
		err = op(actx)
		cancel()
		if err == nil || !retryable(err) || attempt+1 >= b.opts.Retry.Attempts || ctx.Err() != nil {
			return err
		}
	}
}

// sleep waits the backoff before retry number attempt (1 for the first retry).
func (b *Bucket) sleep(ctx context.Context, attempt int) error {
	p := &b.opts.Retry
	d := p.BaseDelay << min(attempt-1, 30)
	if d > p.MaxDelay || d <= 0 {
		d = p.MaxDelay
	}
	if d > 0 {
		d = rand.N(d) + 1
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stat returns an object's size and ETag.
func (b *Bucket) Stat(ctx context.Context, name string) (Object, error) {
	var o Object
	err := b.do(ctx, func(ctx context.Context) error {
		var err error
		o, err = b.be.stat(ctx, b.root+name)
		return err
	})
	o.Name = name
	return withModTime(o), err
}

// List returns the objects under the root whose names start with prefix, sorted by name.
func (b *Bucket) List(ctx context.Context, prefix string) ([]Object, error) {
	var objs []Object
	var err error
	if tl, ok := b.be.(timedLister); ok {
		// A listing of a million keys takes a thousand pages: each page is one attempt.
		objs, err = tl.listEach(ctx, b.root+prefix, b.do)
	} else {
		err = b.do(ctx, func(ctx context.Context) error {
			var err error
			objs, err = b.be.list(ctx, b.root+prefix)
			return err
		})
	}
	if err != nil {
		return nil, err
	}
	for i := range objs {
		objs[i].Name = strings.TrimPrefix(objs[i].Name, b.root)
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Name < objs[j].Name })
	return objs, nil
}

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

// Put stores r (size bytes) as name: one PUT for small objects, a multipart upload in
// parts for large ones on S3; local buckets write a temporary file and rename it. HTTP
// buckets are read-only.
func (b *Bucket) Put(ctx context.Context, name string, r io.ReaderAt, size int64) error {
	p, ok := b.be.(putter)
	if !ok {
		return fmt.Errorf("objstore: %s: %s is read-only", b.URL(name), b.loc.Scheme)
	}
	return p.put(ctx, b.root+name, r, size, &b.c)
}

type creator interface {
	create(ctx context.Context, key string, r io.ReaderAt, size int64, c *counters) error
}

// Create stores r (size bytes) as name only if no object has that name: on S3 one PUT
// with If-None-Match: * (size at most Options.PartSize), locally a hard link of a
// temporary file. When the object exists, nothing is written and the error matches
// [fs.ErrExist]. A retried attempt whose first try stored the object but lost the answer
// also reports fs.ErrExist. Stores that ignore If-None-Match overwrite; versitygw, MinIO
// and AWS S3 honour it. HTTP buckets are read-only.
func (b *Bucket) Create(ctx context.Context, name string, r io.ReaderAt, size int64) error {
	p, ok := b.be.(creator)
	if !ok {
		return fmt.Errorf("objstore: %s: %s is read-only", b.URL(name), b.loc.Scheme)
	}
	return p.create(ctx, b.root+name, r, size, &b.c)
}

type deleter interface {
	delete(ctx context.Context, key string) error
}

// Delete removes the object name; an absent one is not an error. HTTP buckets are
// read-only.
func (b *Bucket) Delete(ctx context.Context, name string) error {
	d, ok := b.be.(deleter)
	if !ok {
		return fmt.Errorf("objstore: %s: %s is read-only", b.URL(name), b.loc.Scheme)
	}
	return d.delete(ctx, b.root+name)
}

// Upload is a multipart upload begun and never completed or aborted: its parts take
// space in the store (and are billed) but no object shows them.
type Upload struct {
	Name      string // the object it would have made, relative to the bucket's root
	ID        string
	Initiated time.Time
}

type uploader interface {
	uploads(ctx context.Context, prefix string) ([]Upload, error)
	abort(ctx context.Context, key, id string) error
}

// Uploads lists the unfinished multipart uploads under the bucket's root whose names
// start with prefix. Stores without multipart uploads (local, HTTP) have none; an S3
// store that does not list them gives an error wrapping [ErrNoUploadList].
func (b *Bucket) Uploads(ctx context.Context, prefix string) ([]Upload, error) {
	u, ok := b.be.(uploader)
	if !ok {
		return nil, nil
	}
	ups, err := u.uploads(ctx, b.root+prefix)
	for i := range ups {
		ups[i].Name = strings.TrimPrefix(ups[i].Name, b.root)
	}
	return ups, err
}

// AbortUpload aborts an unfinished multipart upload, freeing its parts.
func (b *Bucket) AbortUpload(ctx context.Context, up Upload) error {
	u, ok := b.be.(uploader)
	if !ok {
		return fmt.Errorf("objstore: %s: %s has no multipart uploads", b.URL(up.Name), b.loc.Scheme)
	}
	return u.abort(ctx, b.root+up.Name, up.ID)
}

// Resolve parses a dataset URL or shard list and returns the bucket of its root and the
// names it selects, relative to that root:
//
//   - a brace pattern names its expansion, in order, without listing (a missing shard
//     shows when it is fetched);
//   - a glob in the last element lists the directory or prefix and keeps the matches, sorted;
//   - a local directory or an s3 prefix (ending in '/', or naming no object) lists every
//     object beneath it, sorted;
//   - anything else names one object.
//
// A pattern or prefix that selects nothing is an error naming the URL.
func Resolve(ctx context.Context, spec string, opts *Options) (*Bucket, []string, error) {
	loc, err := ParseURL(spec)
	if err != nil {
		return nil, nil, err
	}
	dir, pattern := splitPattern(loc.Path)
	if pattern == "" {
		return resolvePlain(ctx, spec, loc, opts)
	}
	rootLoc := loc
	rootLoc.Path = dir
	if loc.Scheme == "file" && dir == "" {
		rootLoc.Path = ""
	}
	b, err := openBucket(ctx, rootLoc, opts)
	if err != nil {
		return nil, nil, err
	}
	names, err := ExpandBraces(pattern)
	if err != nil {
		return nil, nil, err
	}
	if !hasGlob(pattern) {
		for _, n := range names {
			if !fs.ValidPath(n) {
				return nil, nil, fmt.Errorf("objstore: %q: %q is not a valid object name", spec, n)
			}
		}
		return b, names, nil
	}
	if loc.Scheme == "http" || loc.Scheme == "https" {
		return nil, nil, fmt.Errorf("objstore: %q: globs need a listing, which HTTP servers do not give; use a brace range", spec)
	}
	for _, n := range names {
		if err := checkGlob(spec, n); err != nil {
			return nil, nil, err
		}
	}
	literal := pattern[:strings.IndexAny(pattern, "{*?[")]
	objs, err := b.List(ctx, literal)
	if err != nil {
		return nil, nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, o := range objs {
		for _, n := range names {
			if ok, _ := path.Match(n, o.Name); ok && !seen[o.Name] {
				seen[o.Name] = true
				out = append(out, o.Name)
			}
		}
	}
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("objstore: %q: %w: no object matches", spec, fs.ErrNotExist)
	}
	sort.Strings(out)
	return b, out, nil
}

func resolvePlain(ctx context.Context, spec string, loc Location, opts *Options) (*Bucket, []string, error) {
	switch loc.Scheme {
	case "file":
		fi, err := os.Stat(loc.Path)
		if err != nil {
			return nil, nil, fmt.Errorf("objstore: %w", err)
		}
		if !fi.IsDir() {
			dl := loc
			dl.Path = filepath.Dir(loc.Path)
			b, err := openBucket(ctx, dl, opts)
			return b, []string{filepath.Base(loc.Path)}, err
		}
		b, err := openBucket(ctx, loc, opts)
		if err != nil {
			return nil, nil, err
		}
		return listAll(ctx, spec, b)
	case "s3":
		if loc.Path == "" || strings.HasSuffix(loc.Path, "/") {
			b, err := openBucket(ctx, loc, opts)
			if err != nil {
				return nil, nil, err
			}
			return listAll(ctx, spec, b)
		}
		dl := loc
		dl.Path = path.Dir(loc.Path) + "/"
		if dl.Path == "./" {
			dl.Path = ""
		}
		b, err := openBucket(ctx, dl, opts)
		if err != nil {
			return nil, nil, err
		}
		base := path.Base(loc.Path)
		_, serr := b.Stat(ctx, base)
		if serr == nil {
			return b, []string{base}, nil
		}
		if !errors.Is(serr, fs.ErrNotExist) {
			return nil, nil, serr
		}
		// No such object: maybe a prefix written without its slash.
		pl := loc
		pl.Path += "/"
		pb, err := openBucket(ctx, pl, opts)
		if err != nil {
			return nil, nil, err
		}
		return listAll(ctx, spec, pb)
	default:
		dl := loc
		dl.Path = path.Dir(loc.Path)
		b, err := openBucket(ctx, dl, opts)
		return b, []string{path.Base(loc.Path)}, err
	}
}

func listAll(ctx context.Context, spec string, b *Bucket) (*Bucket, []string, error) {
	objs, err := b.List(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	if len(objs) == 0 {
		return nil, nil, fmt.Errorf("objstore: %q: %w: no objects under it", spec, fs.ErrNotExist)
	}
	names := make([]string, len(objs))
	for i, o := range objs {
		names[i] = o.Name
	}
	return b, names, nil
}
