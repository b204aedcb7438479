// Package s3test starts a real S3-compatible server for tests — versitygw with its posix
// backend on 127.0.0.1 over a temporary directory — and puts a fault-injecting proxy in
// front of any HTTP server.
//
// The server binary is found as $CONVEYOR_VERSITYGW, then versitygw in PATH, then in
// $GOBIN, $GOPATH/bin and ~/go/bin; a test is skipped with a message saying how to
// install it when none is there:
//
//	go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
package s3test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Install is the command that installs the server the tests use.
const Install = "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// A Server is a running S3-compatible server with one empty bucket.
type Server struct {
	Endpoint  string // http://127.0.0.1:PORT
	Bucket    string
	AccessKey string
	SecretKey string
	Dir       string // the posix backend's root: Dir/Bucket/key holds each object
	client    *s3.Client
}

// Binary returns the versitygw binary's path, or "" when it is not installed.
func Binary() string {
	if p := os.Getenv("CONVEYOR_VERSITYGW"); p != "" {
		return p
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	var dirs []string
	if d := os.Getenv("GOBIN"); d != "" {
		dirs = append(dirs, d)
	}
	if d := os.Getenv("GOPATH"); d != "" {
		for _, p := range filepath.SplitList(d) {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	}
	if h, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(h, "go", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "versitygw")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// Start starts a server on a free port with a bucket named "conveyor-test", and stops
// it when the test ends. It skips the test when versitygw is not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary()
	if bin == "" {
		t.Skipf("s3test: versitygw not found (PATH, GOBIN, GOPATH/bin, ~/go/bin); install it with: %s", Install)
	}
	dir := t.TempDir()
	root, side := filepath.Join(dir, "root"), filepath.Join(dir, "meta")
	for _, d := range []string{root, side} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := &Server{Bucket: "conveyor-test", AccessKey: "conveyortest", SecretKey: "conveyor-test-secret", Dir: root}
	var lastErr error
	for try := 0; try < 3; try++ {
		addr, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		cmd := exec.Command(bin, "--port", addr, "--quiet", "posix", "--sidecar", side, root)
		cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatalf("s3test: starting %s: %v", bin, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		if lastErr = waitListening(addr, exited); lastErr != nil {
			cmd.Process.Kill()
			<-exited
			lastErr = fmt.Errorf("%v; its output: %s", lastErr, log.String())
			continue
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-exited
		})
		s.Endpoint = "http://" + addr
		break
	}
	if s.Endpoint == "" {
		t.Fatalf("s3test: versitygw did not start: %v", lastErr)
	}
	s.client = s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &s.Bucket}); err != nil {
		t.Fatalf("s3test: creating bucket %s: %v", s.Bucket, err)
	}
	return s
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func waitListening(addr string, exited <-chan error) error {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("exited: %v", err)
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("not listening on %s after 15s", addr)
}

// Env points the standard AWS configuration chain at the server for the rest of the
// test: static keys in the environment, no shared files, no instance metadata, and
// AWS_ENDPOINT_URL set to endpoint (the server's, or a proxy's in front of it).
func (s *Server) Env(t testing.TB, endpoint string) {
	t.Helper()
	if endpoint == "" {
		endpoint = s.Endpoint
	}
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID":           s.AccessKey,
		"AWS_SECRET_ACCESS_KEY":       s.SecretKey,
		"AWS_SESSION_TOKEN":           "",
		"AWS_REGION":                  "us-east-1",
		"AWS_ENDPOINT_URL":            endpoint,
		"AWS_ENDPOINT_URL_S3":         "",
		"AWS_PROFILE":                 "",
		"AWS_CONFIG_FILE":             filepath.Join(dir, "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_WEB_IDENTITY_TOKEN_FILE": "",
		"AWS_ROLE_ARN":                "",
	} {
		t.Setenv(k, v)
		if v == "" {
			os.Unsetenv(k) // t.Setenv restores it at the end
		}
	}
}

// Put stores an object directly, bypassing the code under test.
func (s *Server) Put(t testing.TB, key string, data []byte) {
	t.Helper()
	_, err := s.client.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: &s.Bucket, Key: &key, Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		t.Fatalf("s3test: put %s: %v", key, err)
	}
}

// PutChecksum stores data under key with a full-object checksum of the given algorithm
// ("CRC32C", "CRC32", "CRC64NVME"), computed by the SDK and recorded by the server.
func (s *Server) PutChecksum(t testing.TB, key string, data []byte, alg string) {
	t.Helper()
	_, err := s.client.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: &s.Bucket, Key: &key, Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
		ChecksumAlgorithm: types.ChecksumAlgorithm(alg),
	})
	if err != nil {
		t.Fatalf("s3test: put %s with %s: %v", key, alg, err)
	}
}

// StartUpload begins a multipart upload of key and sends one part of data, leaving it
// unfinished, as a process killed mid-upload does; it returns the upload's id.
func (s *Server) StartUpload(t testing.TB, key string, data []byte) string {
	t.Helper()
	ctx := context.Background()
	up, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.Bucket, Key: &key})
	if err != nil {
		t.Fatalf("s3test: start upload %s: %v", key, err)
	}
	_, err = s.client.UploadPart(ctx, &s3.UploadPartInput{
		Bucket: &s.Bucket, Key: &key, UploadId: up.UploadId, PartNumber: aws.Int32(1),
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		t.Fatalf("s3test: upload part of %s: %v", key, err)
	}
	return aws.ToString(up.UploadId)
}

// Get reads an object directly, bypassing the code under test.
func (s *Server) Get(t testing.TB, key string) []byte {
	t.Helper()
	out, err := s.client.GetObject(context.Background(), &s3.GetObjectInput{Bucket: &s.Bucket, Key: &key})
	if err != nil {
		t.Fatalf("s3test: get %s: %v", key, err)
	}
	defer out.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(out.Body); err != nil {
		t.Fatalf("s3test: get %s: %v", key, err)
	}
	return b.Bytes()
}

// URL returns s3://bucket/key.
func (s *Server) URL(key string) string {
	return "s3://" + s.Bucket + "/" + strings.TrimPrefix(key, "/")
}
