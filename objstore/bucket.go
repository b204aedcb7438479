package objstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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
