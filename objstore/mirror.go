package objstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sync/errgroup"
)

// Mirror downloads the objects objs of b (names relative to its root, flat: no '/')
// into the existing directory dir, each under its name, at most concurrency at a time
// (values below 1 mean 1). Each object's Size is the most bytes it may hold: a larger
// one fails with an error wrapping ErrTooLarge (see Bucket.DownloadMax), so callers pass
// the size a manifest recorded or the most the format allows, and a server that streams
// without end costs no more than that. Each object is written to a temporary file and
// renamed when whole, so dir never holds a partial object under its name, and a failed
// one leaves nothing. The first error cancels the rest and is returned naming the URL.
func Mirror(ctx context.Context, b *Bucket, objs []Object, dir string, concurrency int) error {
	for _, o := range objs {
		if o.Name == "" || strings.ContainsAny(o.Name, `/\`) || o.Name == "." || o.Name == ".." {
			return fmt.Errorf("objstore: %s: not a plain file name in a flat dataset", b.URL(o.Name))
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(concurrency, 1))
	for _, o := range objs {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return mirrorOne(gctx, b, o, dir) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

func mirrorOne(ctx context.Context, b *Bucket, o Object, dir string) error {
	name := o.Name
	f, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return fmt.Errorf("objstore: %s: %w", b.URL(name), err)
	}
	tmp := f.Name()
	_, err = b.DownloadMax(ctx, name, f, o.Size)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("objstore: %s: %w", b.URL(name), cerr)
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
