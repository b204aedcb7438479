package objstore

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
	"github.com/conveyor-ml/conveyor/internal/units"
)

type s3Backend struct {
	bucket   string
	partSize int64
	maxPages int // Options.MaxListPages
	client   *s3.Client
	do       func(context.Context, func(context.Context) error) error
	// doTimeout is do with a deadline per attempt other than AttemptTimeout, for
	// uploads (see Options.partTimeout).
	doTimeout   func(context.Context, time.Duration, func(context.Context) error) error
	partTimeout func(n int64) time.Duration
	endpoint    bool // an endpoint is configured: the store is not AWS S3
}

func newS3Backend(ctx context.Context, bucket string, o *Options, own func(*http.Transport)) (*s3Backend, error) {
	lo := []func(*config.LoadOptions) error{
		// Every attempt is made, counted and retried here, not inside the SDK.
		config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
	}
	if o.HTTPClient != nil {
		lo = append(lo, config.WithHTTPClient(o.HTTPClient))
	} else {
		lo = append(lo, config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
			o.tune(t)
			own(t)
		})))
	}
	if o.Region != "" {
		lo = append(lo, config.WithRegion(o.Region))
	}
	imdsOnly := onlyIMDS()
	if imdsOnly {
		// Off EC2 the metadata service's fallback warning ("falling back to IMDSv1")
		// would precede the error that says what to set; on EC2 the fallback works.
		lo = append(lo, config.WithLogger(logging.Nop{}))
	}
	cfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return nil, fmt.Errorf("objstore: s3://%s: loading the AWS configuration: %w", bucket, err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	endpoint := o.Endpoint != "" || aws.ToString(cfg.BaseEndpoint) != ""
	if cfg.Credentials != nil {
		cfg.Credentials = &checkedCredentials{inner: cfg.Credentials, imdsOnly: imdsOnly, endpoint: endpoint}
	}
	client := s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		if so.BaseEndpoint != nil && *so.BaseEndpoint != "" {
			so.UsePathStyle = !o.VirtualHosted
		}
		// Stores other than AWS reject or ignore the newer default checksums; the
		// downloads check lengths and ETags themselves.
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		// A GET asks for the stored checksum (checksum.go) and checks it itself, across
		// resumed ranges: the SDK's own check would hash every body a second time.
		so.APIOptions = append(so.APIOptions, func(st *middleware.Stack) error {
			st.Deserialize.Remove("AWSChecksum:ValidateOutputPayloadChecksum") // absent on other operations
			return nil
		})
	})
	return &s3Backend{bucket: bucket, partSize: o.PartSize, maxPages: o.MaxListPages, client: client, endpoint: endpoint}, nil
}

func (s *s3Backend) url(key string) string { return "s3://" + s.bucket + "/" + key }

// s3Err turns an SDK error into an *Error with the status and the store's code.
func (s *s3Backend) s3Err(op, key string, err error) error {
	e := &Error{Op: op, URL: s.url(key), Err: err}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		e.Status = re.HTTPStatusCode()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		e.Code = ae.ErrorCode()
		// The SDK's message repeats the operation and request id; keep the store's words.
		e.Err = errors.New(ae.ErrorMessage())
		if e.Err.Error() == "" {
			e.Err = nil
		}
	}
	var nf *types.NoSuchKey
	var nb *types.NoSuchBucket
	if e.Status == 0 && (errors.As(err, &nf) || errors.As(err, &nb)) {
		e.Status = http.StatusNotFound
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		e.Err = err
	}
	var ce *credentialsError
	if errors.As(err, &ce) {
		e.Err = ce // the SDK's "operation error S3: ..., get identity: get credentials:" adds nothing
	}
	var de *net.DNSError
	if dnsNotFound(err) && errors.As(err, &de) {
		e.Err = de // "lookup HOST: no such host", without the SDK's request dump
	}
	if !s.endpoint && (dnsNotFound(err) || e.Status == http.StatusForbidden || e.Status == http.StatusUnauthorized) {
		e.hint = noEndpointHint
	}
	return e
}

func (s *s3Backend) get(ctx context.Context, key string, off int64) (io.ReadCloser, getResult, error) {
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: &key}
	if off > 0 {
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", off))
	} else {
		in.ChecksumMode = types.ChecksumModeEnabled // stores return it for whole objects only
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		return nil, getResult{}, s.s3Err("GET", key, err)
	}
	r := getResult{length: aws.ToInt64(out.ContentLength), etag: strings.Trim(aws.ToString(out.ETag), `"`)}
	if out.ContentLength == nil {
		r.length = -1
	}
	r.size = r.length
	r.modTime = aws.ToTime(out.LastModified)
	r.encrypted = sseNotMD5(string(out.ServerSideEncryption), aws.ToString(out.SSECustomerAlgorithm))
	if off == 0 && out.ContentRange == nil {
		r.sum = parseWantSum(map[string]string{
			"crc32c": aws.ToString(out.ChecksumCRC32C), "crc32": aws.ToString(out.ChecksumCRC32),
			"crc64nvme": aws.ToString(out.ChecksumCRC64NVME),
		}, string(out.ChecksumType))
	}
	if cr := aws.ToString(out.ContentRange); cr != "" {
		start, total, ok := parseContentRange(cr)
		if !ok {
			out.Body.Close()
			return nil, getResult{}, &Error{Op: "GET", URL: s.url(key), Err: fmt.Errorf("%w: bad Content-Range %q", ErrTruncated, cr)}
		}
		r.start, r.size = start, total
	}
	return out.Body, r, nil
}

func (s *s3Backend) stat(ctx context.Context, key string) (Object, error) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return Object{}, s.s3Err("HEAD", key, err)
	}
	return Object{Name: key, Size: aws.ToInt64(out.ContentLength), ETag: strings.Trim(aws.ToString(out.ETag), `"`), ModTime: aws.ToTime(out.LastModified)}, nil
}

func (s *s3Backend) list(ctx context.Context, prefix string) ([]Object, error) {
	return s.listEach(ctx, prefix, func(ctx context.Context, op func(context.Context) error) error { return op(ctx) })
}

// listEach lists page by page, each page one request run by do (its own attempt, with
// its own deadline and retries), so a long listing never starts again from page 1.
func (s *s3Backend) listEach(ctx context.Context, prefix string, do func(context.Context, func(context.Context) error) error) ([]Object, error) {
	var out []Object
	in := &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &prefix}
	pages := s.pager(prefix)
	for {
		if err := pages.next(fmt.Sprintf("continuation token %q", aws.ToString(in.ContinuationToken))); err != nil {
			return nil, err
		}
		var page *s3.ListObjectsV2Output
		err := do(ctx, func(ctx context.Context) error {
			var err error
			page, err = s.client.ListObjectsV2(ctx, in)
			if err != nil {
				return s.s3Err("LIST", prefix, err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			if strings.HasSuffix(k, "/") {
				continue // a folder marker, not an object
			}
			out = append(out, Object{Name: k, Size: aws.ToInt64(o.Size), ETag: strings.Trim(aws.ToString(o.ETag), `"`), ModTime: aws.ToTime(o.LastModified)})
		}
		if !aws.ToBool(page.IsTruncated) || aws.ToString(page.NextContinuationToken) == "" {
			return out, nil
		}
		in.ContinuationToken = page.NextContinuationToken
	}
}

// A pager guards a paged listing against a store that never ends it: one that answers
// a continuation token it gave before (an endless loop, at hundreds of requests a
// second) or keeps giving new pages past Options.MaxListPages.
type pager struct {
	url   string
	max   int
	pages int
	seen  map[string]bool
}

func (s *s3Backend) pager(prefix string) *pager {
	return &pager{url: s.url(prefix), max: s.maxPages, seen: map[string]bool{}}
}

// next is called before each page with the token (or markers) that asks for it, as
// words for the error.
func (p *pager) next(token string) error {
	if p.pages > 0 && p.seen[token] {
		return &Error{Op: "LIST", URL: p.url, Err: fmt.Errorf("the store answered page %d with a %s it gave before: it would list forever", p.pages, token)}
	}
	if p.pages >= p.max {
		return &Error{Op: "LIST", URL: p.url, Err: fmt.Errorf("more than %d pages (Options.MaxListPages): giving up", p.max)}
	}
	p.seen[token] = true
	p.pages++
	return nil
}

// create uploads in one conditional PUT (If-None-Match: *).
func (s *s3Backend) create(ctx context.Context, key string, r io.ReaderAt, size int64, c *counters) error {
	if size > s.partSize {
		return fmt.Errorf("objstore: %s: Create of %s, more than the part size %s", s.url(key), units.Bytes(size), units.Bytes(s.partSize))
	}
	return s.doTimeout(ctx, s.partTimeout(size), func(ctx context.Context) error {
		_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: &s.bucket, Key: &key, Body: io.NewSectionReader(r, 0, size), ContentLength: aws.Int64(size),
			IfNoneMatch: aws.String("*"),
		})
		if err != nil {
			return s.s3Err("PUT", key, err)
		}
		c.uploaded.Add(size)
		return nil
	})
}

// put uploads in one PUT up to the part size, else as a multipart upload. A multipart upload
// left unfinished by an earlier process for the same key is resumed: its parts whose
// MD5 matches the data are kept, the rest are sent again.
func (s *s3Backend) put(ctx context.Context, key string, r io.ReaderAt, size int64, c *counters) error {
	if size <= s.partSize {
		return s.doTimeout(ctx, s.partTimeout(size), func(ctx context.Context) error {
			_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
				Bucket: &s.bucket, Key: &key, Body: io.NewSectionReader(r, 0, size), ContentLength: aws.Int64(size),
			})
			if err != nil {
				return s.s3Err("PUT", key, err)
			}
			c.uploaded.Add(size)
			return nil
		})
	}
	uploadID, have, err := s.findUpload(ctx, key)
	if err != nil {
		return err
	}
	if uploadID == "" {
		err = s.do(ctx, func(ctx context.Context) error {
			out, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &key})
			if err != nil {
				return s.s3Err("PUT", key, err)
			}
			uploadID = aws.ToString(out.UploadId)
			return nil
		})
		if err != nil {
			return err
		}
	}
	var parts []types.CompletedPart
	for i, off := int32(1), int64(0); off < size; i, off = i+1, off+s.partSize {
		n := min(s.partSize, size-off)
		sec := io.NewSectionReader(r, off, n)
		h := md5.New()
		if _, err := io.Copy(h, sec); err != nil {
			return fmt.Errorf("objstore: %s: reading part %d: %w", s.url(key), i, err)
		}
		sum := hex.EncodeToString(h.Sum(nil))
		if prev, ok := have[i]; ok && prev.size == n && prev.etag == sum {
			parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(i), ETag: aws.String(`"` + sum + `"`)})
			continue
		}
		err := s.doTimeout(ctx, s.partTimeout(n), func(ctx context.Context) error {
			out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
				Bucket: &s.bucket, Key: &key, UploadId: &uploadID, PartNumber: aws.Int32(i),
				Body: io.NewSectionReader(r, off, n), ContentLength: aws.Int64(n),
			})
			if err != nil {
				return s.s3Err("PUT", key, err)
			}
			c.uploaded.Add(n)
			parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(i), ETag: out.ETag})
			return nil
		})
		if err != nil {
			return fmt.Errorf("%w (multipart upload %s, part %d; run again to resume)", err, uploadID, i)
		}
	}
	return s.do(ctx, func(ctx context.Context) error {
		_, err := s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
			Bucket: &s.bucket, Key: &key, UploadId: &uploadID,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		})
		if err != nil {
			return s.s3Err("PUT", key, err)
		}
		return nil
	})
}

type partInfo struct {
	size int64
	etag string
}

func (s *s3Backend) delete(ctx context.Context, key string) error {
	return s.do(ctx, func(ctx context.Context) error {
		if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &key}); err != nil {
			return s.s3Err("DELETE", key, err)
		}
		return nil
	})
}

// uploads lists the unfinished multipart uploads whose keys start with prefix, page by page.
func (s *s3Backend) uploads(ctx context.Context, prefix string) ([]Upload, error) {
	var out []Upload
	in := &s3.ListMultipartUploadsInput{Bucket: &s.bucket, Prefix: &prefix}
	pages := s.pager(prefix)
	for {
		if err := pages.next(fmt.Sprintf("key marker %q and upload id marker %q", aws.ToString(in.KeyMarker), aws.ToString(in.UploadIdMarker))); err != nil {
			return nil, err
		}
		var page *s3.ListMultipartUploadsOutput
		err := s.do(ctx, func(ctx context.Context) error {
			var err error
			if page, err = s.client.ListMultipartUploads(ctx, in); err != nil {
				return s.s3Err("LIST", prefix, err)
			}
			return nil
		})
		if noUploadList(err) {
			return nil, fmt.Errorf("%w: %w", ErrNoUploadList, err)
		}
		if err != nil {
			return nil, err
		}
		for _, u := range page.Uploads {
			out = append(out, Upload{Name: aws.ToString(u.Key), ID: aws.ToString(u.UploadId), Initiated: aws.ToTime(u.Initiated)})
		}
		if !aws.ToBool(page.IsTruncated) {
			return out, nil
		}
		in.KeyMarker, in.UploadIdMarker = page.NextKeyMarker, page.NextUploadIdMarker
	}
}

func (s *s3Backend) abort(ctx context.Context, key, id string) error {
	return s.do(ctx, func(ctx context.Context) error {
		if _, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: &key, UploadId: &id}); err != nil {
			return s.s3Err("ABORT", key, err)
		}
		return nil
	})
}

// noUploadList reports whether err, a ListMultipartUploads that failed, says that the
// store does not list uploads rather than that the listing failed (see ErrNoUploadList).
func noUploadList(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound && e.Code == "NoSuchUpload"
}

// findUpload returns the newest unfinished multipart upload of key and its parts.
func (s *s3Backend) findUpload(ctx context.Context, key string) (string, map[int32]partInfo, error) {
	var id string
	err := s.do(ctx, func(ctx context.Context) error {
		out, err := s.client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &s.bucket, Prefix: &key})
		if err != nil {
			return s.s3Err("LIST", key, err)
		}
		for _, u := range out.Uploads {
			if aws.ToString(u.Key) == key {
				id = aws.ToString(u.UploadId)
			}
		}
		return nil
	})
	if noUploadList(err) {
		return "", nil, nil // none to resume: a new upload
	}
	if err != nil || id == "" {
		return "", nil, err
	}
	have := map[int32]partInfo{}
	err = s.do(ctx, func(ctx context.Context) error {
		p := s3.NewListPartsPaginator(s.client, &s3.ListPartsInput{Bucket: &s.bucket, Key: &key, UploadId: &id})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return s.s3Err("LIST", key, err)
			}
			for _, pt := range page.Parts {
				have[aws.ToInt32(pt.PartNumber)] = partInfo{size: aws.ToInt64(pt.Size), etag: strings.Trim(aws.ToString(pt.ETag), `"`)}
			}
		}
		return nil
	})
	return id, have, err
}
