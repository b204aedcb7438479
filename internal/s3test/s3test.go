// Package s3test starts a real S3-compatible server for tests on 127.0.0.1, and puts a
// fault-injecting proxy in front of any HTTP server.
//
// Two servers are known, each its own binary run as its own process (neither is a
// dependency of this module): versitygw with its posix backend over a temporary
// directory, and gofakes3 with its memory backend. [Start] starts versitygw; [Each] runs
// a test once against every server, as subtests named after them. A binary is found as
// $CONVEYOR_VERSITYGW or $CONVEYOR_GOFAKES3, then by name in PATH, then in $GOBIN,
// $GOPATH/bin and ~/go/bin; a test is skipped with a message saying how to install it
// when none is there:
//
//	go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
//	go install github.com/johannesboyne/gofakes3/cmd/gofakes3@v1.2.0
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

// Install is the command that installs the server [Start] uses.
const Install = "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// An Impl is an S3-compatible server the tests can run against.
type Impl struct {
	Name    string // the binary's name, and the subtest's
	Env     string // the variable naming the binary's path, looked at first
	Install string // the command that installs the binary
	Files   bool   // objects are files under Server.Dir
	// Checksums: the server gives every object a full-object checksum, CRC64NVME
	// when its upload asked for none, and returns it with the object.
	Checksums bool
	Auth      bool // the server checks request signatures against its keys
	// args returns the command line that serves on addr, keeping what it stores
	// under dir (when it stores files) and accepting s's keys.
	args func(addr, dir string, s *Server) []string
}

// Versitygw serves its posix backend: each object is a file under Server.Dir.
var Versitygw = Impl{
	Name:      "versitygw",
	Env:       "CONVEYOR_VERSITYGW",
	Install:   Install,
	Files:     true,
	Checksums: true,
	Auth:      true,
	args: func(addr, dir string, s *Server) []string {
		return []string{"--port", addr, "--quiet", "posix", "--sidecar", filepath.Join(dir, "meta"), s.Dir}
	},
}

// Gofakes3 serves from memory (Server.Dir is empty). It does not check request
// signatures, and records a full-object checksum only when the upload sends one.
var Gofakes3 = Impl{
	Name:    "gofakes3",
	Env:     "CONVEYOR_GOFAKES3",
	Install: "go install github.com/johannesboyne/gofakes3/cmd/gofakes3@v1.2.0",
	args: func(addr, dir string, s *Server) []string {
		return []string{"-host", addr, "-backend", "memory", "-quiet"}
	},
}

// Impls lists the servers [Each] runs tests against.
var Impls = []Impl{Versitygw, Gofakes3}

// Each runs f against every server in Impls, each in a subtest named after it and with
// a bucket of its own; a subtest whose server is not installed is skipped.
func Each(t *testing.T, f func(t *testing.T, srv *Server)) {
	t.Helper()
	for _, impl := range Impls {
		t.Run(impl.Name, func(t *testing.T) {
			f(t, impl.Start(t))
		})
	}
}

// A Server is a running S3-compatible server with one empty bucket.
type Server struct {
	Endpoint  string // http://127.0.0.1:PORT
	Bucket    string
	AccessKey string
	SecretKey string
	Impl      string // the server's name: "versitygw", "gofakes3"
	Checksums bool   // Impl.Checksums
	Auth      bool   // Impl.Auth
	// Dir is the posix backend's root, where Dir/Bucket/key holds each object; it is
	// empty for a server that keeps objects elsewhere.
	Dir    string
	client *s3.Client
}

// Binary returns the versitygw binary's path, or "" when it is not installed.
func Binary() string { return Versitygw.Binary() }

// Binary returns the server's binary's path, or "" when it is not installed.
func (impl Impl) Binary() string {
	if p := os.Getenv(impl.Env); p != "" {
		return p
	}
	if p, err := exec.LookPath(impl.Name); err == nil {
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
		p := filepath.Join(d, impl.Name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// Start starts versitygw on a free port with a bucket named "conveyor-test", and stops
// it when the test ends. It skips the test when versitygw is not installed.
func Start(t testing.TB) *Server { return Versitygw.Start(t) }

// Start starts the server on a free port with a bucket named "conveyor-test", and stops
// it when the test ends. It skips the test when the server is not installed.
func (impl Impl) Start(t testing.TB) *Server {
	t.Helper()
	bin := impl.Binary()
	if bin == "" {
		t.Skipf("s3test: %s not found ($%s, PATH, GOBIN, GOPATH/bin, ~/go/bin); install it with: %s", impl.Name, impl.Env, impl.Install)
	}
	dir := t.TempDir()
	s := &Server{Impl: impl.Name, Checksums: impl.Checksums, Auth: impl.Auth, Bucket: "conveyor-test", AccessKey: "conveyortest", SecretKey: "conveyor-test-secret"}
	if impl.Files {
		s.Dir = filepath.Join(dir, "root")
		for _, d := range []string{s.Dir, filepath.Join(dir, "meta")} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	var lastErr error
	for try := 0; try < 3; try++ {
		addr, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		cmd := exec.Command(bin, impl.args(addr, dir, s)...)
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
		t.Fatalf("s3test: %s did not start: %v", impl.Name, lastErr)
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
		t.Fatalf("s3test: creating bucket %s on %s: %v", s.Bucket, impl.Name, err)
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

// Delete deletes an object directly, bypassing the code under test.
func (s *Server) Delete(t testing.TB, key string) {
	t.Helper()
	if _, err := s.client.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: &s.Bucket, Key: &key}); err != nil {
		t.Fatalf("s3test: delete %s: %v", key, err)
	}
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
