package objstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Resolve parses a dataset URL or shard list and returns the bucket of its root and the
// names it selects, relative to that root:
//
//   - a brace pattern names its expansion, in order, without listing (a missing shard
//     shows when it is fetched);
//   - a glob in the last element lists the directory or prefix and keeps the matches, sorted;
//   - a local directory or an s3 prefix (ending in '/', or naming no object) lists every
//     object beneath it, sorted;
//   - anything else names one object.
//
// A pattern or prefix that selects nothing is an error naming the URL.
func Resolve(ctx context.Context, spec string, opts *Options) (*Bucket, []string, error) {
	loc, err := ParseURL(spec)
	if err != nil {
		return nil, nil, err
	}
	dir, pattern := splitPattern(loc.Path)
	if pattern == "" {
		return resolvePlain(ctx, spec, loc, opts)
	}
	rootLoc := loc
	rootLoc.Path = dir
	if loc.Scheme == "file" && dir == "" {
		rootLoc.Path = ""
	}
	b, err := openBucket(ctx, rootLoc, opts)
	if err != nil {
		return nil, nil, err
	}
	names, err := ExpandBraces(pattern)
	if err != nil {
		return nil, nil, err
	}
	if !hasGlob(pattern) {
		for _, n := range names {
			if !fs.ValidPath(n) {
				return nil, nil, fmt.Errorf("objstore: %q: %q is not a valid object name", spec, n)
			}
		}
		return b, names, nil
	}
	if loc.Scheme == "http" || loc.Scheme == "https" {
		return nil, nil, fmt.Errorf("objstore: %q: globs need a listing, which HTTP servers do not give; use a brace range", spec)
	}
	for _, n := range names {
		if err := checkGlob(spec, n); err != nil {
			return nil, nil, err
		}
	}
	literal := pattern[:strings.IndexAny(pattern, "{*?[")]
	objs, err := b.List(ctx, literal)
	if err != nil {
		return nil, nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, o := range objs {
		for _, n := range names {
			if ok, _ := path.Match(n, o.Name); ok && !seen[o.Name] {
				seen[o.Name] = true
				out = append(out, o.Name)
			}
		}
	}
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("objstore: %q: %w: no object matches", spec, fs.ErrNotExist)
	}
	sort.Strings(out)
	return b, out, nil
}

func resolvePlain(ctx context.Context, spec string, loc Location, opts *Options) (*Bucket, []string, error) {
	switch loc.Scheme {
	case "file":
		fi, err := os.Stat(loc.Path)
		if err != nil {
			return nil, nil, fmt.Errorf("objstore: %w", err)
		}
		if !fi.IsDir() {
			dl := loc
			dl.Path = filepath.Dir(loc.Path)
			b, err := openBucket(ctx, dl, opts)
			return b, []string{filepath.Base(loc.Path)}, err
		}
		b, err := openBucket(ctx, loc, opts)
		if err != nil {
			return nil, nil, err
		}
		return listAll(ctx, spec, b)
	case "s3":
		if loc.Path == "" || strings.HasSuffix(loc.Path, "/") {
			b, err := openBucket(ctx, loc, opts)
			if err != nil {
				return nil, nil, err
			}
			return listAll(ctx, spec, b)
		}
		dl := loc
		dl.Path = path.Dir(loc.Path) + "/"
		if dl.Path == "./" {
			dl.Path = ""
		}
		b, err := openBucket(ctx, dl, opts)
		if err != nil {
			return nil, nil, err
		}
		base := path.Base(loc.Path)
		_, serr := b.Stat(ctx, base)
		if serr == nil {
			return b, []string{base}, nil
		}
		if !errors.Is(serr, fs.ErrNotExist) {
			return nil, nil, serr
		}
		// No such object: maybe a prefix written without its slash.
		pl := loc
		pl.Path += "/"
		pb, err := openBucket(ctx, pl, opts)
		if err != nil {
			return nil, nil, err
		}
		return listAll(ctx, spec, pb)
	default:
		dl := loc
		dl.Path = path.Dir(loc.Path)
		b, err := openBucket(ctx, dl, opts)
		return b, []string{path.Base(loc.Path)}, err
	}
}

func listAll(ctx context.Context, spec string, b *Bucket) (*Bucket, []string, error) {
	objs, err := b.List(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	if len(objs) == 0 {
		return nil, nil, fmt.Errorf("objstore: %q: %w: no objects under it", spec, fs.ErrNotExist)
	}
	names := make([]string, len(objs))
	for i, o := range objs {
		names[i] = o.Name
	}
	return b, names, nil
}
