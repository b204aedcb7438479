package objstore

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// imdsTimeout bounds the credential lookup when the EC2 instance metadata service is the
// only source left in the AWS chain (nothing in the environment or ~/.aws). On an
// instance with a role it answers in milliseconds; elsewhere the SDK's own attempts at
// it take seconds, and a user who forgot to export AWS_ACCESS_KEY_ID should hear so at
// once, not after an SDK message about EC2 roles.
const imdsTimeout = time.Second

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
// credentials is a *credentialsError: not retried, and saying what to set.
type checkedCredentials struct {
	inner    aws.CredentialsProvider
	imdsOnly bool // the chain can only ask the instance metadata service; see imdsTimeout
	endpoint bool // an endpoint is configured (not AWS S3)
}

func (c *checkedCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	if c.imdsOnly {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, imdsTimeout)
		defer cancel()
	}
	creds, err := c.inner.Retrieve(ctx)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return creds, err
		}
		return creds, &credentialsError{imdsOnly: c.imdsOnly, endpoint: c.endpoint, err: err}
	}
	return creds, nil
}

// A credentialsError is a request that could not be signed: the AWS chain found no
// credentials, or the source it found failed. It matches fs.ErrPermission and is not
// retried: another attempt would ask the same sources the same question.
type credentialsError struct {
	imdsOnly bool
	endpoint bool
	err      error
}

func (e *credentialsError) Error() string {
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
