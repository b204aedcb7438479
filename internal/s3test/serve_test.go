package s3test

import (
	"encoding/json"
	"flag"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Flags of TestServe, which runs a server for scripts (bench/s3.sh) rather than testing.
var (
	serveInfo    = flag.String("serve.info", "", "TestServe: start a server, write its endpoints as JSON to this file, and serve until SIGINT or SIGTERM")
	serveUpload  = flag.String("serve.upload", "", "TestServe: upload the files of this folder (not recursive) under -serve.prefix first")
	servePrefix  = flag.String("serve.prefix", "", "TestServe: key prefix of the uploaded files")
	serveLatency = flag.Duration("serve.latency", 0, "TestServe: latency the proxy endpoint adds to every request")
)

// ServeInfo is what TestServe writes to -serve.info.
type ServeInfo struct {
	Endpoint  string `json:"endpoint"` // the server itself
	Proxy     string `json:"proxy"`    // the server behind -serve.latency
	Bucket    string `json:"bucket"`
	AccessKey string `json:"access_key"`
	SecretKey string `json:"secret_key"`
}

// TestServe is not a test: with -serve.info it starts versitygw and a latency proxy in
// front of it, uploads a folder, writes the endpoints and serves until interrupted, so a
// benchmark script can read a real S3 server:
//
//	go test -c -o s3serve ./internal/s3test
//	./s3serve -test.run TestServe -test.timeout 0 -serve.info info.json -serve.upload SHARDS -serve.prefix wds/ -serve.latency 20ms
func TestServe(t *testing.T) {
	if *serveInfo == "" {
		t.Skip("runs only with -serve.info (a server for bench scripts)")
	}
	srv := Start(t)
	p := NewProxy(t, srv.Endpoint, Faults{Latency: *serveLatency})
	if *serveUpload != "" {
		ents, err := os.ReadDir(*serveUpload)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if !e.Type().IsRegular() {
				continue
			}
			data, err := os.ReadFile(filepath.Join(*serveUpload, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			srv.Put(t, *servePrefix+e.Name(), data)
		}
	}
	info, err := json.Marshal(ServeInfo{Endpoint: srv.Endpoint, Proxy: p.URL, Bucket: srv.Bucket, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	tmp := *serveInfo + ".tmp"
	if err := os.WriteFile(tmp, info, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, *serveInfo); err != nil {
		t.Fatal(err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	start := time.Now()
	<-sig
	t.Logf("served %s for %v", srv.Endpoint, time.Since(start).Round(time.Second))
}
