package objstore

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"
)

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

// partTimeout bounds one upload request of n bytes: AttemptTimeout for the request to
// start and answer, plus the time to send n bytes at 256 KiB/s (64 MiB: 4m16s more), a
// floor slow enough for a congested link but finite for a dead one.
func (o *Options) partTimeout(n int64) time.Duration {
	return o.Retry.AttemptTimeout + time.Duration(n)*time.Second/(256<<10)
}

// ShardCacheOptions configures a [ShardCache]. A nil *ShardCacheOptions means defaults.
type ShardCacheOptions struct {
	// Dir is where the cache keeps its files: each Cache makes its own new
	// subdirectory of Dir (objstore-*) and removes it on Close, so several caches (the
	// ranks on one node) may share a Dir without touching one another's files. The
	// subdirectories of caches that died without Close are left for the user to clean
	// up. Default: the system's temporary directory.
	Dir string
	// MaxBytes bounds the bytes of the objects in Dir, fetches in flight included.
	// An object larger than it fails with ErrTooLarge. Default 16 GiB.
	MaxBytes int64
	// Concurrency is how many objects are fetched at once. Default 4.
	Concurrency int
}

// EnsureDefaults fills o's zero fields with their defaults and returns o; a nil o
// becomes a new CacheOptions holding the defaults.
func (o *ShardCacheOptions) EnsureDefaults() *ShardCacheOptions {
	if o == nil {
		o = &ShardCacheOptions{}
	}
	if o.Dir == "" {
		o.Dir = os.TempDir()
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = 16 << 30
	}
	if o.Concurrency == 0 {
		o.Concurrency = 4
	}
	return o
}

// Validate reports every invalid field of o, defaults filled (see EnsureDefaults),
// joined into one error; nil when all are valid.
func (o *ShardCacheOptions) Validate() error {
	var errs []error
	if o.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("objstore: CacheOptions.MaxBytes %d is negative", o.MaxBytes))
	}
	if o.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("objstore: CacheOptions.Concurrency %d is negative", o.Concurrency))
	}
	return errors.Join(errs...)
}

// String prints the effective options.
func (o ShardCacheOptions) String() string {
	return fmt.Sprintf("objstore.ShardCacheOptions{Dir: %q, MaxBytes: %d, Concurrency: %d}", o.Dir, o.MaxBytes, o.Concurrency)
}
