package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/internal/s3test"
	"github.com/conveyor-ml/conveyor/objstore"
)

// trickle writes body[from:] one byte every gap, flushing each, until the client goes.
func trickle(w http.ResponseWriter, r *http.Request, body []byte, from int, gap time.Duration) {
	w.Header().Set("Content-Length", fmt.Sprint(len(body)-from))
	if from > 0 {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, len(body)-1, len(body)))
		w.WriteHeader(http.StatusPartialContent)
	}
	for _, c := range body[from:] {
		if _, err := w.Write([]byte{c}); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		select {
		case <-time.After(gap):
		case <-r.Context().Done():
			return
		}
	}
}

// A body that sends a byte every 200 ms never trips the silence watchdog, but brings
// far less than MinProgressBytes in a ProgressInterval: each attempt is abandoned as too
// slow and retried; a store that only trickles fails after Retry.Attempts of them,
// naming the URL and what it sent in how long; one that recovers finishes the download
// from where the trickle stopped. A body that is slow but keeps the minimum is not cut.
func TestDownloadTooSlow(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 1000)
	opts := *fastRetry
	opts.Retry.Attempts = 3
	opts.Retry.AttemptTimeout = 5 * time.Second // longer than any gap: only the rate can fire
	opts.Retry.MinProgressBytes = 1000
	opts.Retry.ProgressInterval = 500 * time.Millisecond
	for _, tc := range []struct {
		name    string
		serve   func(w http.ResponseWriter, r *http.Request, n int64)
		wantErr bool
	}{
		{"always trickles", func(w http.ResponseWriter, r *http.Request, _ int64) {
			trickle(w, r, body, 0, 200*time.Millisecond)
		}, true},
		{"trickles once", func(w http.ResponseWriter, r *http.Request, n int64) {
			if n == 1 {
				trickle(w, r, body, 0, 200*time.Millisecond)
				return
			}
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
		}, false},
		{"slow but enough", func(w http.ResponseWriter, r *http.Request, _ int64) {
			// 2000 bytes every 50 ms: each read brings more than the minimum.
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			for i := 0; i < len(body); i += 2000 {
				w.Write(body[i:min(i+2000, len(body))])
				w.(http.Flusher).Flush()
				time.Sleep(50 * time.Millisecond)
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reqs atomic.Int64
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tc.serve(w, r, reqs.Add(1))
			}))
			defer hs.Close()
			b, err := objstore.OpenBucket(context.Background(), hs.URL+"/", &opts)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			_, got, err := download(t, b, "slow.bin")
			if !tc.wantErr {
				if err != nil || !bytes.Equal(got, body) {
					t.Fatalf("got %d bytes, %v; want %d", len(got), err, len(body))
				}
				return
			}
			t.Log(err)
			if err == nil || !strings.Contains(err.Error(), b.URL("slow.bin")) || !strings.Contains(err.Error(), "too slow") ||
				!strings.Contains(err.Error(), " B in ") || !strings.Contains(err.Error(), "after 3 attempts") {
				t.Errorf("error %v, want one naming the URL and saying it was too slow, after 3 attempts", err)
			}
			if n := reqs.Load(); n != 3 {
				t.Errorf("%d requests, want Retry.Attempts = 3", n)
			}
		})
	}
}

// fakeS3 starts a web server answering as an S3 endpoint and points the AWS
// configuration chain at it.
func fakeS3(t *testing.T, h http.HandlerFunc) {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	(&s3test.Server{AccessKey: "key", SecretKey: "secret"}).Env(t, hs.URL)
}

// A listing whose store answers the same continuation token (or markers) again, or
// never stops giving pages, ends with an error naming the URL instead of listing
// forever.
func TestS3ListNeverEnds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tokens func(n int64) string // the next page's token after page n
		want   string
	}{
		{"same token", func(int64) string { return "same" }, "it gave before"},
		{"tokens cycle", func(n int64) string { return fmt.Sprint("t", n%3) }, "it gave before"},
		{"new token each page", func(n int64) string { return fmt.Sprint("t", n) }, "more than 20 pages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reqs atomic.Int64
			fakeS3(t, func(w http.ResponseWriter, r *http.Request) {
				n := reqs.Add(1)
				tok := tc.tokens(n)
				if r.URL.Query().Has("uploads") {
					fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<ListMultipartUploadsResult><Bucket>bkt</Bucket><IsTruncated>true</IsTruncated><NextKeyMarker>%s</NextKeyMarker><NextUploadIdMarker>u</NextUploadIdMarker>
<Upload><Key>data/k%d</Key><UploadId>u</UploadId></Upload></ListMultipartUploadsResult>`, tok, n)
					return
				}
				fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult><Name>bkt</Name><KeyCount>1</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated><NextContinuationToken>%s</NextContinuationToken>
<Contents><Key>data/k%d.tar</Key><Size>1</Size><ETag>"x"</ETag></Contents></ListBucketResult>`, tok, n)
			})
			opts := *fastRetry
			opts.MaxListPages = 20
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			b, err := objstore.OpenBucket(ctx, "s3://bkt/data/", &opts)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			for _, list := range []func() error{
				func() error { _, err := b.List(ctx, ""); return err },
				func() error { _, err := b.Uploads(ctx, ""); return err },
			} {
				reqs.Store(0)
				err := list()
				t.Log(err)
				if ctx.Err() != nil {
					t.Fatalf("the listing did not stop by itself: %v", err)
				}
				if err == nil || !strings.Contains(err.Error(), "s3://bkt/data/") || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %v, want one naming s3://bkt/data/ and saying %q", err, tc.want)
				}
				if n := reqs.Load(); n > 20 {
					t.Errorf("%d requests", n)
				}
			}
		})
	}
}

// An upload whose body the store finds changed (a byte flipped in transit: 400
// BadDigest, XAmzContentSHA256Mismatch, InvalidDigest) is sent again, up to
// Retry.Attempts times.
func TestS3PutRetriesBadDigest(t *testing.T) {
	for _, code := range []string{"BadDigest", "XAmzContentSHA256Mismatch", "InvalidDigest"} {
		for _, failures := range []int64{1, 5} {
			t.Run(fmt.Sprint(code, failures), func(t *testing.T) {
				var puts atomic.Int64
				var got []byte
				fakeS3(t, func(w http.ResponseWriter, r *http.Request) {
					data, _ := io.ReadAll(r.Body)
					if r.Method != http.MethodPut {
						http.Error(w, "unexpected", http.StatusNotImplemented)
						return
					}
					if puts.Add(1) <= failures {
						w.WriteHeader(http.StatusBadRequest)
						fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>%s</Code><Message>the body does not match its digest</Message><RequestId>1</RequestId></Error>`, code)
						return
					}
					got = data
					w.Header().Set("ETag", `"x"`)
				})
				opts := *fastRetry
				opts.Retry.Attempts = 3
				b, err := objstore.OpenBucket(context.Background(), "s3://bkt/data/", &opts)
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				err = b.Put(context.Background(), "a.bin", strings.NewReader("payload"), 7)
				if failures < 3 {
					if err != nil || string(got) != "payload" || puts.Load() != failures+1 {
						t.Errorf("Put: %v after %d PUTs, stored %q", err, puts.Load(), got)
					}
					return
				}
				t.Log(err)
				if err == nil || !strings.Contains(err.Error(), code) || !strings.Contains(err.Error(), "s3://bkt/data/a.bin") || puts.Load() != 3 {
					t.Errorf("Put: %v after %d PUTs, want a failure naming %s and the URL after 3", err, puts.Load(), code)
				}
				var oe *objstore.Error
				if !errors.As(err, &oe) || oe.Status != http.StatusBadRequest {
					t.Errorf("error %#v, want an *objstore.Error with status 400", err)
				}
			})
		}
	}
}
