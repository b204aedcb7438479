package objstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// fakeProvider answers after a delay with credentials or an error.
type fakeProvider struct {
	delay time.Duration
	err   error
	calls int
}

func (p *fakeProvider) Retrieve(ctx context.Context) (aws.Credentials, error) {
	p.calls++
	select {
	case <-time.After(p.delay):
	case <-ctx.Done():
		return aws.Credentials{}, ctx.Err()
	}
	if p.err != nil {
		return aws.Credentials{}, p.err
	}
	return aws.Credentials{AccessKeyID: "k", SecretAccessKey: "s", Source: "fake"}, nil
}

// statusErr is a credential source's HTTP answer.
type statusErr int

func (e statusErr) Error() string       { return fmt.Sprintf("status %d", int(e)) }
func (e statusErr) HTTPStatusCode() int { return int(e) }

// A metadata service that is there is given the SDK's own time, however slowly it
// answers; only one whose address answers nothing fails at once. A source that fails for
// a moment is retried; one that says it has no credentials is not.
func TestCheckedCredentials(t *testing.T) {
	imds := httptest.NewServer(http.NotFoundHandler())
	defer imds.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := "http://" + closed.Addr().String()
	closed.Close()
	t.Setenv("AWS_EC2_METADATA_DISABLED", "")

	// Slow but there: 1.5 s is longer than the old 1 s limit on the whole lookup.
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.URL)
	slow := &fakeProvider{delay: 1500 * time.Millisecond}
	c := &checkedCredentials{inner: slow, imdsOnly: true}
	if creds, err := c.Retrieve(context.Background()); err != nil || creds.AccessKeyID != "k" {
		t.Errorf("slow metadata service: %v, %v", creds, err)
	}

	// Nothing at the address: refused before the SDK is asked, and final.
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", deadAddr)
	never := &fakeProvider{}
	c = &checkedCredentials{inner: never, imdsOnly: true}
	start := time.Now()
	_, err = c.Retrieve(context.Background())
	if err == nil || retryable(err) || never.calls != 0 || time.Since(start) > 2*time.Second {
		t.Errorf("no metadata service: %v (retryable %v, %d calls, %v)", err, retryable(err), never.calls, time.Since(start))
	}

	// The service says there is no role: final. It fails for a moment: retried.
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.URL)
	for _, tc := range []struct {
		err   error
		retry bool
	}{
		{statusErr(http.StatusNotFound), false},
		{statusErr(http.StatusForbidden), false},
		{statusErr(http.StatusInternalServerError), true},
		{errors.New("connection reset"), true},
	} {
		c = &checkedCredentials{inner: &fakeProvider{err: tc.err}, imdsOnly: true}
		_, err := c.Retrieve(context.Background())
		if err == nil || retryable(err) != tc.retry {
			t.Errorf("imds %v: %v, retryable %v, want %v", tc.err, err, retryable(err), tc.retry)
		}
	}
	// A configured source (a container endpoint, STS) failing is always retried, and its
	// error is the source's, not advice to set keys.
	c = &checkedCredentials{inner: &fakeProvider{err: statusErr(http.StatusForbidden)}}
	if _, err := c.Retrieve(context.Background()); err == nil || !retryable(err) {
		t.Errorf("configured source failing: %v, retryable %v", err, retryable(err))
	} else if s := err.Error(); s != "fetching AWS credentials: status 403" {
		t.Errorf("configured source failing: %q", s)
	}
}
