package objstore

import (
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// A Location is a parsed dataset URL.
type Location struct {
	// Scheme is "file", "s3", "http" or "https".
	Scheme string
	// Host is the bucket for s3 and host[:port] for http(s); empty for file.
	Host string
	// Path is the object key or prefix for s3 (no leading slash), the URL path for
	// http(s) (leading slash) and the local path for file.
	Path string
	// Query is the raw query of an http(s) URL (kept for presigned URLs).
	Query string
}

// String gives the location back as a URL (a plain path for local files).
func (l Location) String() string {
	switch l.Scheme {
	case "file":
		return l.Path
	case "s3":
		return "s3://" + l.Host + "/" + l.Path
	default:
		s := l.Scheme + "://" + l.Host + l.Path
		if l.Query != "" {
			s += "?" + l.Query
		}
		return s
	}
}

// Remote reports whether the location is not on the local file system.
func (l Location) Remote() bool { return l.Scheme != "file" }

// IsRemote reports whether raw names an object store or web server rather than a local
// path, without validating it further.
func IsRemote(raw string) bool {
	i := strings.Index(raw, "://")
	if i <= 0 {
		return false
	}
	return strings.ToLower(raw[:i]) != "file"
}

// ParseURL parses a dataset URL: a local path, file:///abs/path, s3://bucket[/key] or
// http(s)://host/path. Brace ranges and globs are left in Path; see [ExpandBraces].
func ParseURL(raw string) (Location, error) {
	if raw == "" {
		return Location{}, fmt.Errorf("objstore: empty dataset URL")
	}
	i := strings.Index(raw, "://")
	if i < 0 {
		return Location{Scheme: "file", Path: raw}, nil
	}
	scheme := strings.ToLower(raw[:i])
	rest := raw[i+3:]
	switch scheme {
	case "file":
		if rest == "" {
			return Location{}, fmt.Errorf("objstore: %q: file URL without a path", raw)
		}
		if !strings.HasPrefix(rest, "/") {
			return Location{}, fmt.Errorf("objstore: %q: file URL must be file:///absolute/path", raw)
		}
		p, err := url.PathUnescape(rest)
		if err != nil {
			return Location{}, fmt.Errorf("objstore: %q: %v", raw, err)
		}
		return Location{Scheme: "file", Path: p}, nil
	case "s3":
		bucket, key, _ := strings.Cut(rest, "/")
		if err := validBucket(bucket); err != nil {
			return Location{}, fmt.Errorf("objstore: %q: %v", raw, err)
		}
		if strings.ContainsAny(key, "?#") {
			return Location{}, fmt.Errorf("objstore: %q: s3 keys here may not contain ? or #", raw)
		}
		return Location{Scheme: "s3", Host: bucket, Path: key}, nil
	case "http", "https":
		u, err := url.Parse(raw)
		if err != nil {
			return Location{}, fmt.Errorf("objstore: %q: %v", raw, err)
		}
		if u.Host == "" {
			return Location{}, fmt.Errorf("objstore: %q: no host", raw)
		}
		if u.User != nil {
			return Location{}, fmt.Errorf("objstore: %q: credentials in the URL are not accepted", raw)
		}
		p := u.Path
		if p == "" {
			p = "/"
		}
		return Location{Scheme: scheme, Host: u.Host, Path: p, Query: u.RawQuery}, nil
	default:
		return Location{}, fmt.Errorf("objstore: %q: unsupported scheme %q (want a local path, file://, s3://, http:// or https://)", raw, scheme)
	}
}

// validBucket applies the S3 bucket naming rules that matter for parsing: 3 to 63
// characters of lower-case letters, digits, dots and hyphens. (Legacy buckets with
// upper-case letters or underscores are accepted too: some S3-compatible stores allow them.)
func validBucket(b string) error {
	if b == "" {
		return fmt.Errorf("no bucket")
	}
	if len(b) > 255 {
		return fmt.Errorf("bucket name longer than 255 bytes")
	}
	for _, r := range b {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
		default:
			return fmt.Errorf("bucket %q: invalid character %q", b, r)
		}
	}
	return nil
}

// MaxExpansion bounds how many names one brace pattern may expand to, so a typo such as
// {0..99999999999} fails instead of exhausting memory.
const MaxExpansion = 10_000_000

// ExpandBraces expands WebDataset-style brace patterns: {000..123} is an inclusive
// numeric range whose width is kept when either end has a leading zero (or both ends
// have the same width), {a,b,c} lists alternatives, and several braces multiply, left
// to right. A pattern without braces expands to itself. Unbalanced or empty braces and a
// range whose end is below its start are errors naming the pattern.
func ExpandBraces(pattern string) ([]string, error) {
	out := []string{""}
	rest := pattern
	for {
		open := strings.IndexByte(rest, '{')
		closeAt := strings.IndexByte(rest, '}')
		if open < 0 {
			if closeAt >= 0 {
				return nil, fmt.Errorf("objstore: %q: unbalanced '}'", pattern)
			}
			for i := range out {
				out[i] += rest
			}
			return out, nil
		}
		if closeAt >= 0 && closeAt < open {
			return nil, fmt.Errorf("objstore: %q: unbalanced '}'", pattern)
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("objstore: %q: unbalanced '{'", pattern)
		}
		body := rest[open+1 : open+end]
		if strings.IndexByte(body, '{') >= 0 {
			return nil, fmt.Errorf("objstore: %q: nested braces are not supported", pattern)
		}
		alts, err := braceBody(body)
		if err != nil {
			return nil, fmt.Errorf("objstore: %q: %v", pattern, err)
		}
		if len(out)*len(alts) > MaxExpansion {
			return nil, fmt.Errorf("objstore: %q: expands to more than %d names", pattern, MaxExpansion)
		}
		prefix := rest[:open]
		next := make([]string, 0, len(out)*len(alts))
		for _, o := range out {
			for _, a := range alts {
				next = append(next, o+prefix+a)
			}
		}
		out = next
		rest = rest[open+end+1:]
	}
}

func braceBody(body string) ([]string, error) {
	if body == "" {
		return nil, fmt.Errorf("empty braces")
	}
	if lo, hi, ok := strings.Cut(body, ".."); ok {
		a, err1 := strconv.ParseUint(lo, 10, 63)
		b, err2 := strconv.ParseUint(hi, 10, 63)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("range {%s}: ends must be non-negative integers", body)
		}
		if b < a {
			return nil, fmt.Errorf("range {%s}: end below start", body)
		}
		if b-a >= MaxExpansion {
			return nil, fmt.Errorf("range {%s}: more than %d names", body, MaxExpansion)
		}
		width := 0
		if (len(lo) > 1 && lo[0] == '0') || (len(hi) > 1 && hi[0] == '0') || len(lo) == len(hi) {
			width = max(len(lo), len(hi))
		}
		out := make([]string, 0, b-a+1)
		for v := a; v <= b; v++ {
			s := strconv.FormatUint(v, 10)
			if len(s) < width {
				s = strings.Repeat("0", width-len(s)) + s
			}
			out = append(out, s)
		}
		return out, nil
	}
	return strings.Split(body, ","), nil
}

// hasGlob reports whether s has a path.Match metacharacter.
func hasGlob(s string) bool { return strings.ContainsAny(s, "*?[") }

// splitPattern splits a key or path at the last '/' before the first brace or glob
// metacharacter: the directory part is the store's root, the rest the pattern of names
// under it.
func splitPattern(p string) (dir, pattern string) {
	first := strings.IndexAny(p, "{*?[")
	if first < 0 {
		return p, ""
	}
	slash := strings.LastIndexByte(p[:first], '/')
	if slash < 0 {
		return "", p
	}
	return p[:slash+1], p[slash+1:]
}

// checkGlob validates a glob pattern with path.Match so a malformed one fails up front.
func checkGlob(raw, pattern string) error {
	if _, err := path.Match(pattern, ""); err != nil {
		return fmt.Errorf("objstore: %q: bad glob %q: %v", raw, pattern, err)
	}
	if _, err := filepath.Match(pattern, ""); err != nil {
		return fmt.Errorf("objstore: %q: bad glob %q: %v", raw, pattern, err)
	}
	return nil
}
