package objstore

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Location
		wantErr string
	}{
		{in: "data/train", want: Location{Scheme: "file", Path: "data/train"}},
		{in: "/abs/x.tar", want: Location{Scheme: "file", Path: "/abs/x.tar"}},
		{in: "file:///abs/a%20b", want: Location{Scheme: "file", Path: "/abs/a b"}},
		{in: "s3://bkt/pre/fix/", want: Location{Scheme: "s3", Host: "bkt", Path: "pre/fix/"}},
		{in: "S3://bkt", want: Location{Scheme: "s3", Host: "bkt"}},
		{in: "https://h.example:8443/d/x.tar?sig=1", want: Location{Scheme: "https", Host: "h.example:8443", Path: "/d/x.tar", Query: "sig=1"}},
		{in: "", wantErr: "empty"},
		{in: "s3://", wantErr: "no bucket"},
		{in: "s3://bad bucket/x", wantErr: "invalid character"},
		{in: "gs://b/x", wantErr: `unsupported scheme "gs"`},
		{in: "file://rel/path", wantErr: "absolute"},
		{in: "https:///nohost", wantErr: "no host"},
		{in: "https://u:p@h/x", wantErr: "credentials"},
	} {
		got, err := ParseURL(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseURL(%q) error %v, want one containing %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestExpandBraces(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "a.tar", want: []string{"a.tar"}},
		{in: "train-{000..003}.tar", want: []string{"train-000.tar", "train-001.tar", "train-002.tar", "train-003.tar"}},
		{in: "s-{8..11}", want: []string{"s-8", "s-9", "s-10", "s-11"}},
		{in: "s-{08..11}", want: []string{"s-08", "s-09", "s-10", "s-11"}},
		{in: "{a,b}/{0..1}.tar", want: []string{"a/0.tar", "a/1.tar", "b/0.tar", "b/1.tar"}},
		{in: "x-{5..5}", want: []string{"x-5"}},
		{in: "x-{3..1}", wantErr: "end below start"},
		{in: "x-{1..a}", wantErr: "non-negative integers"},
		{in: "x-{1..2", wantErr: "unbalanced '{'"},
		{in: "x-}1..2{", wantErr: "unbalanced '}'"},
		{in: "x-{}", wantErr: "empty braces"},
		{in: "x-{{1..2}}", wantErr: "nested"},
		{in: "{0..99999999999}", wantErr: "more than"},
	} {
		got, err := ExpandBraces(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), tc.in) {
				t.Errorf("ExpandBraces(%q) error %v, want one naming the pattern and containing %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ExpandBraces(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestResolveLocal(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"s-000.tar", "s-001.tar", "s-002.tar", "other.txt", "sub/s-100.tar"} {
		p := filepath.Join(dir, n)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for _, tc := range []struct {
		spec string
		want []string
	}{
		{dir + "/s-{000..001}.tar", []string{"s-000.tar", "s-001.tar"}},
		{dir + "/s-*.tar", []string{"s-000.tar", "s-001.tar", "s-002.tar"}},
		{dir + "/s-00[02].tar", []string{"s-000.tar", "s-002.tar"}},
		{dir, []string{"other.txt", "s-000.tar", "s-001.tar", "s-002.tar", "sub/s-100.tar"}},
		{dir + "/other.txt", []string{"other.txt"}},
		{"file://" + dir + "/s-{001..002}.tar", []string{"s-001.tar", "s-002.tar"}},
	} {
		b, names, err := Resolve(ctx, tc.spec, nil)
		if err != nil || !reflect.DeepEqual(names, tc.want) {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tc.spec, names, err, tc.want)
			continue
		}
		// Every name reads back through the bucket.
		for _, n := range names {
			f, _ := os.CreateTemp(t.TempDir(), "dl")
			o, err := b.Download(ctx, n, f, nil)
			f.Close()
			if err != nil || o.Size != int64(len(filepath.Base(n)))+int64(len(n)-len(filepath.Base(n))) {
				t.Errorf("Resolve(%q): Download(%q) = %+v, %v", tc.spec, n, o, err)
			}
		}
	}
	if _, _, err := Resolve(ctx, dir+"/none-*.tar", nil); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "none-*.tar") {
		t.Errorf("empty glob: %v, want ErrNotExist naming the pattern", err)
	}
	if _, _, err := Resolve(ctx, dir+"/missing", nil); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing path: %v", err)
	}
	if _, _, err := Resolve(ctx, dir+"/s-[.tar", nil); err == nil || !strings.Contains(err.Error(), "bad glob") {
		t.Errorf("bad glob: %v", err)
	}
	if _, _, err := Resolve(ctx, "https://example.invalid/s-*.tar", nil); err == nil || !strings.Contains(err.Error(), "brace range") {
		t.Errorf("https glob: %v", err)
	}
}

// Shards that are symbolic links (git-annex, DVC) are listed and read through the link;
// they were left out of a glob's listing without a word. A link to nothing is listed,
// so that reading it fails naming it; a link to a directory is not.
func TestResolveLocalSymlinks(t *testing.T) {
	store, dir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(store, "content"), []byte("shard bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"s-000.tar": "content", "s-001.tar": "absent", "s-002.tar": "."} {
		if err := os.Symlink(filepath.Join(store, target), filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	b, names, err := Resolve(ctx, dir+"/s-*.tar", nil)
	if err != nil || !reflect.DeepEqual(names, []string{"s-000.tar", "s-001.tar"}) {
		t.Fatalf("Resolve = %q, %v; want the links to a file and to nothing", names, err)
	}
	f, err := os.CreateTemp(t.TempDir(), "dl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if o, err := b.Download(ctx, "s-000.tar", f, nil); err != nil || o.Size != int64(len("shard bytes")) {
		t.Errorf("Download through the link: %+v, %v", o, err)
	}
	if _, err := b.Download(ctx, "s-001.tar", f, nil); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "s-001.tar") {
		t.Errorf("Download of a link to nothing: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Retry: RetryPolicy{Attempts: -1}}, "Retry.Attempts"},
		{Options{Retry: RetryPolicy{BaseDelay: 5e9, MaxDelay: 1e9}}, "Retry.MaxDelay"},
		{Options{PartSize: 1 << 20}, "Options.PartSize"},
		{Options{MaxConns: -2}, "Options.MaxConns"},
		{Options{MaxListPages: -1}, "Options.MaxListPages"},
		{Options{Retry: RetryPolicy{MinProgressBytes: -1}}, "Retry.MinProgressBytes"},
		{Options{Retry: RetryPolicy{ProgressInterval: -1}}, "Retry.ProgressInterval"},
		{Options{Endpoint: "s3://x"}, "Options.Endpoint"},
	} {
		_, err := OpenBucket(context.Background(), t.TempDir(), &tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one naming %s", tc.o, err, tc.want)
		}
	}
	// Every invalid field is reported, not only the first.
	bad := &Options{PartSize: 1, MaxConns: -1, Retry: RetryPolicy{Attempts: -1, ProgressInterval: -1}}
	_, err := OpenBucket(context.Background(), t.TempDir(), bad)
	for _, want := range []string{"Options.PartSize", "Options.MaxConns", "Retry.Attempts", "Retry.ProgressInterval"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: error %v, want one naming %s", bad, err, want)
		}
	}
	b, _ := OpenBucket(context.Background(), t.TempDir(), nil)
	_, err = NewShardCache(b, &ShardCacheOptions{MaxBytes: -1, Concurrency: -1})
	for _, want := range []string{"CacheOptions.MaxBytes", "CacheOptions.Concurrency"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("negative MaxBytes and Concurrency: %v, want an error naming %s", err, want)
		}
	}
}

func TestOptionsEnsureDefaults(t *testing.T) {
	o := (*Options)(nil).EnsureDefaults()
	if o.MaxConns != 64 || o.PartSize != 64<<20 || o.MaxListPages != 10000 || o.Retry.Attempts != 10 || o.Validate() != nil {
		t.Errorf("defaults %v: %v", o, o.Validate())
	}
	given := &Options{MaxConns: 3}
	if given.EnsureDefaults() != given || given.MaxConns != 3 || given.PartSize != 64<<20 {
		t.Errorf("EnsureDefaults changed a set field or did not return its receiver: %v", given)
	}
	c := (*ShardCacheOptions)(nil).EnsureDefaults()
	if c.Dir != os.TempDir() || c.MaxBytes != 16<<30 || c.Concurrency != 4 || c.Validate() != nil {
		t.Errorf("cache defaults %v: %v", c, c.Validate())
	}
}
