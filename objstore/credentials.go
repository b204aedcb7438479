package objstore

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// imdsDialTimeout bounds the check that the EC2 instance metadata service is there at all,
// made when it is the only source left in the AWS chain (nothing in the environment or
// ~/.aws). Off EC2 its address answers nothing, and the SDK's own attempts at it take
// seconds each; a user who forgot to export AWS_ACCESS_KEY_ID should hear so at once, not
// after an SDK message about EC2 roles. A service that is there, however slowly it answers
// (kube2iam, a throttled instance, many ranks starting at once), gets the SDK's own time.
const imdsDialTimeout = 500 * time.Millisecond

// credentialEnv lists the variables that give the AWS chain a source of credentials
// other than the instance metadata service: keys, a profile, web identity (EKS), a
// container (ECS) endpoint, or the files of the shared configuration.
var credentialEnv = []string{
	"AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
	"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
	"AWS_CONTAINER_CREDENTIALS_FULL_URI",
}

// onlyIMDS reports whether the AWS chain can find credentials nowhere but in the EC2
// instance metadata service: none of credentialEnv is set and neither shared file exists.
func onlyIMDS() bool {
	for _, k := range credentialEnv {
		if os.Getenv(k) != "" {
			return false
		}
	}
	home, _ := os.UserHomeDir()
	files := map[string]string{
		"AWS_CONFIG_FILE":             filepath.Join(home, ".aws", "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(home, ".aws", "credentials"),
	}
	for env, def := range files {
		p := os.Getenv(env)
		if p == "" {
			if home == "" {
				continue
			}
			p = def
		}
		if _, err := os.Stat(p); err == nil {
			return false
		}
	}
	return true
}

// checkedCredentials wraps the AWS chain's provider so that a failure to find
// credentials is a *credentialsError saying what to set; one that no retry can mend (no
// source at all, or a metadata service saying there is no role) is final, not retried.
type checkedCredentials struct {
	inner    aws.CredentialsProvider
	imdsOnly bool // the chain can only ask the instance metadata service
	endpoint bool // an endpoint is configured (not AWS S3)
}

func (c *checkedCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	if c.imdsOnly && !imdsReachable(ctx) {
		return aws.Credentials{}, &credentialsError{imdsOnly: true, endpoint: c.endpoint, final: true, err: errNoIMDS}
	}
	creds, err := c.inner.Retrieve(ctx)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return creds, err
		}
		final := c.imdsOnly && (noRole(err) || imdsDisabled())
		return creds, &credentialsError{imdsOnly: c.imdsOnly, endpoint: c.endpoint, final: final, err: err}
	}
	return creds, nil
}

// errNoIMDS is the metadata service's address answering nothing.
var errNoIMDS = errors.New("the EC2 instance metadata service does not answer")

// imdsDisabled reports whether AWS_EC2_METADATA_DISABLED turns the metadata service off.
func imdsDisabled() bool { return strings.EqualFold(os.Getenv("AWS_EC2_METADATA_DISABLED"), "true") }

// imdsReachable reports whether a TCP connection to the metadata service opens within
// imdsDialTimeout (or whether it is disabled, which the SDK itself reports at once).
func imdsReachable(ctx context.Context) bool {
	if imdsDisabled() {
		return true
	}
	host := "169.254.169.254:80"
	if strings.EqualFold(os.Getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"), "IPv6") {
		host = "[fd00:ec2::254]:80"
	}
	if e := os.Getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT"); e != "" {
		if u, err := url.Parse(e); err == nil && u.Host != "" {
			host = u.Host
			if u.Port() == "" {
				host = net.JoinHostPort(u.Hostname(), map[bool]string{true: "443", false: "80"}[u.Scheme == "https"])
			}
		}
	}
	d := net.Dialer{Timeout: imdsDialTimeout}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// noRole reports whether a credential source answered that it has nothing to give: an
// HTTP 401, 403 or 404 from the metadata service (no role on this instance, or a sandbox
// refusing the address).
func noRole(err error) bool {
	var re interface{ HTTPStatusCode() int }
	if !errors.As(err, &re) {
		return false
	}
	switch re.HTTPStatusCode() {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		return true
	}
	return false
}

// A credentialsError is a request that could not be signed: the AWS chain found no
// credentials, or the source it found failed. It matches fs.ErrPermission. A final one
// (no source at all, or one that says it has none) is not retried: another attempt
// would ask the same sources the same question. Any other (a container endpoint or STS
// failing for a moment, a slow metadata service) is retried as a transport error is.
type credentialsError struct {
	imdsOnly bool
	endpoint bool
	final    bool
	err      error
}

func (e *credentialsError) Error() string {
	if !e.final {
		return "fetching AWS credentials: " + e.err.Error()
	}
	s := "no AWS credentials"
	if !e.imdsOnly {
		s = "no usable AWS credentials"
	}
	s += ": set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)"
	if !e.endpoint {
		s += ", and for a store other than AWS S3 (MinIO, versitygw, Ceph, R2) AWS_ENDPOINT_URL and AWS_REGION"
	}
	if e.imdsOnly {
		// The SDK's words would be about the EC2 metadata service, the last place it
		// looked; the places before it are what the user can fix.
		return s + " (none in the environment or ~/.aws, and no EC2 instance role)"
	}
	return s + ": " + e.err.Error()
}

func (e *credentialsError) Unwrap() error { return e.err }

func (e *credentialsError) Is(target error) bool { return target == fs.ErrPermission }

// noEndpointHint is added to errors that suggest the request went to AWS S3 by mistake.
const noEndpointHint = "no endpoint is set, so the request went to AWS S3; for another store set AWS_ENDPOINT_URL and AWS_REGION"

// dnsNotFound reports whether err is a host name that does not exist (NXDOMAIN): a typo
// or a missing endpoint, which no retry mends.
func dnsNotFound(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de) && de.IsNotFound
}
