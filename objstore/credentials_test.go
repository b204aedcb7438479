package objstore_test

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/objstore"
)

// clearAWSEnv leaves the AWS chain nothing to read from the environment or ~/.aws.
func clearAWSEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{
		"AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY", "AWS_SESSION_TOKEN",
		"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION",
		"AWS_EC2_METADATA_DISABLED", "AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_CA_BUNDLE",
	} {
		t.Setenv(k, "")
	}
	none := filepath.Join(t.TempDir(), "none")
	t.Setenv("AWS_CONFIG_FILE", none)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", none)
	t.Setenv("HOME", t.TempDir())
}

// TestMissingCredentialsFailFast: with no credentials anywhere, the first request fails
// at once, saying which variables to set, whatever the EC2 metadata service does: it
// used to be retried for about 20 s (the default policy's ten attempts), each attempt
// asking the metadata service again, and then to end with the SDK's words about EC2
// roles.
func TestMissingCredentialsFailFast(t *testing.T) {
	var store atomic.Int64
	s3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		store.Add(1)
		http.Error(w, "unsigned", http.StatusForbidden)
	}))
	defer s3.Close()
	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusForbidden) // what some sandboxes and proxies answer
	}))
	defer forbidden.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unreachable := "http://" + closed.Addr().String() // nothing answers there (off EC2)
	closed.Close()

	for _, tc := range []struct {
		name     string
		imds     string // AWS_EC2_METADATA_SERVICE_ENDPOINT
		disabled bool   // AWS_EC2_METADATA_DISABLED
		endpoint bool   // AWS_ENDPOINT_URL set
	}{
		{name: "imds-forbidden", imds: forbidden.URL},
		{name: "imds-unreachable", imds: unreachable},
		{name: "imds-disabled", disabled: true},
		{name: "endpoint-set", imds: forbidden.URL, endpoint: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearAWSEnv(t)
			if tc.imds != "" {
				t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", tc.imds)
			}
			if tc.disabled {
				t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
			}
			url := "s3://conveyor-test/train/"
			if tc.endpoint {
				t.Setenv("AWS_ENDPOINT_URL", s3.URL)
			} else {
				// Without an endpoint the request would go to AWS; it must not get that far.
				t.Setenv("AWS_ENDPOINT_URL_S3", "")
			}
			start := time.Now()
			b, err := objstore.OpenBucket(context.Background(), url, nil) // the default retry policy
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			_, err = b.List(context.Background(), "")
			took := time.Since(start)
			t.Logf("failed in %v: %v", took.Round(time.Millisecond), err)
			if err == nil {
				t.Fatal("List without credentials succeeded")
			}
			if took > 5*time.Second {
				t.Errorf("took %v to fail; want well under 2 s", took)
			}
			for _, want := range []string{url, "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %s", err, want)
				}
			}
			if got := strings.Contains(err.Error(), "AWS_ENDPOINT_URL"); got == tc.endpoint {
				t.Errorf("error %q: names AWS_ENDPOINT_URL %v, want %v (an endpoint is set: %v)", err, got, !tc.endpoint, tc.endpoint)
			}
			if strings.Contains(err.Error(), "IMDS") {
				t.Errorf("error %q speaks of the metadata service, not of what to set", err)
			}
			if !errors.Is(err, fs.ErrPermission) {
				t.Errorf("error %q does not match fs.ErrPermission", err)
			}
			if n := store.Load(); n != 0 {
				t.Errorf("the store got %d requests; an unsigned request should not be sent", n)
			}
		})
	}
}

// TestMissingEndpointFailsFast: with credentials but no endpoint, requests go to AWS S3;
// where its host name does not resolve (a machine without a route to AWS), the error is
// not retried and says that no endpoint is set. It used to be retried for about 13 s and
// name only the amazonaws.com host.
func TestMissingEndpointFailsFast(t *testing.T) {
	clearAWSEnv(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	var dials atomic.Int64
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			host, _, _ := net.SplitHostPort(addr)
			return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}}
		},
	}}
	start := time.Now()
	b, err := objstore.OpenBucket(context.Background(), "s3://conveyor-test/train/", &objstore.Options{HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = b.List(context.Background(), "")
	took := time.Since(start)
	t.Logf("failed in %v after %d dials: %v", took.Round(time.Millisecond), dials.Load(), err)
	if err == nil {
		t.Fatal("List succeeded")
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d dials; a host that does not exist should not be retried", n)
	}
	if took > 5*time.Second {
		t.Errorf("took %v to fail; want well under 2 s", took)
	}
	for _, want := range []string{"s3://conveyor-test/train/", "amazonaws.com", "AWS_ENDPOINT_URL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}
