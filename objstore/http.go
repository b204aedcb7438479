package objstore

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// httpBackend reads objects from a web server with GET and HEAD; it cannot list.
type httpBackend struct {
	base, query string
	client      *http.Client
}

func (h *httpBackend) url(key string) string {
	u := h.base + key
	if h.query != "" {
		u += "?" + h.query
	}
	return u
}

func (h *httpBackend) get(ctx context.Context, key string, off int64) (io.ReadCloser, getResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.url(key), nil)
	if err != nil {
		return nil, getResult{}, &Error{Op: "GET", URL: h.url(key), Status: 400, Err: err}
	}
	if off > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, getResult{}, &Error{Op: "GET", URL: h.url(key), Err: err}
	}
	r := getResult{length: resp.ContentLength, etag: strings.Trim(resp.Header.Get("ETag"), `"`),
		modTime:   lastModified(resp.Header),
		encrypted: sseNotMD5(resp.Header.Get("X-Amz-Server-Side-Encryption"), resp.Header.Get("X-Amz-Server-Side-Encryption-Customer-Algorithm")),
	}
	switch resp.StatusCode {
	case http.StatusOK:
		r.size = resp.ContentLength
		r.sum = headerWantSum(resp.Header) // an S3 object behind a URL may carry one
	case http.StatusPartialContent:
		start, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if !ok {
			resp.Body.Close()
			return nil, getResult{}, &Error{Op: "GET", URL: h.url(key), Err: fmt.Errorf("%w: bad Content-Range %q", ErrTruncated, resp.Header.Get("Content-Range"))}
		}
		r.start, r.size = start, total
	default:
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, getResult{}, &Error{Op: "GET", URL: h.url(key), Status: resp.StatusCode}
	}
	return resp.Body, r, nil
}

// parseContentRange reads "bytes START-END/TOTAL".
func parseContentRange(s string) (start, total int64, ok bool) {
	s, found := strings.CutPrefix(s, "bytes ")
	if !found {
		return 0, 0, false
	}
	rng, tot, found := strings.Cut(s, "/")
	if !found {
		return 0, 0, false
	}
	a, _, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, false
	}
	start, err1 := strconv.ParseInt(a, 10, 64)
	total, err2 := strconv.ParseInt(tot, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return start, total, true
}

func (h *httpBackend) stat(ctx context.Context, key string) (Object, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, h.url(key), nil)
	if err != nil {
		return Object{}, &Error{Op: "HEAD", URL: h.url(key), Status: 400, Err: err}
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return Object{}, &Error{Op: "HEAD", URL: h.url(key), Err: err}
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Object{}, &Error{Op: "HEAD", URL: h.url(key), Status: resp.StatusCode}
	}
	return Object{Name: key, Size: resp.ContentLength, ETag: strings.Trim(resp.Header.Get("ETag"), `"`), ModTime: lastModified(resp.Header)}, nil
}

// lastModified reads the Last-Modified header; zero when absent or malformed.
func lastModified(h http.Header) time.Time {
	t, err := http.ParseTime(h.Get("Last-Modified"))
	if err != nil {
		return time.Time{}
	}
	return t
}

func (h *httpBackend) list(ctx context.Context, prefix string) ([]Object, error) {
	return nil, &Error{Op: "LIST", URL: h.url(prefix), Status: 400, Err: fmt.Errorf("HTTP servers cannot be listed; name the shards with a brace range")}
}
