package objstore

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// Put stores r (size bytes) as name: one PUT for small objects, a multipart upload in
// parts for large ones on S3; local buckets write a temporary file and rename it. HTTP
// buckets are read-only.
func (b *Bucket) Put(ctx context.Context, name string, r io.ReaderAt, size int64) error {
	p, ok := b.be.(putter)
	if !ok {
		return fmt.Errorf("objstore: %s: %s is read-only", b.URL(name), b.loc.Scheme)
	}
	return p.put(ctx, b.root+name, r, size, &b.c)
}

type creator interface {
	create(ctx context.Context, key string, r io.ReaderAt, size int64, c *counters) error
}

// Create stores r (size bytes) as name only if no object has that name: on S3 one PUT
// with If-None-Match: * (size at most Options.PartSize), locally a hard link of a
// temporary file. When the object exists, nothing is written and the error matches
// [fs.ErrExist]. A retried attempt whose first try stored the object but lost the answer
// also reports fs.ErrExist. Stores that ignore If-None-Match overwrite; versitygw, MinIO
// and AWS S3 honour it. HTTP buckets are read-only.
func (b *Bucket) Create(ctx context.Context, name string, r io.ReaderAt, size int64) error {
	p, ok := b.be.(creator)
	if !ok {
		return fmt.Errorf("objstore: %s: %s is read-only", b.URL(name), b.loc.Scheme)
	}
	return p.create(ctx, b.root+name, r, size, &b.c)
}

type deleter interface {
	delete(ctx context.Context, key string) error
}

// Delete removes the object name; an absent one is not an error. HTTP buckets are
// read-only.
func (b *Bucket) Delete(ctx context.Context, name string) error {
	d, ok := b.be.(deleter)
	if !ok {
		return fmt.Errorf("objstore: %s: %s is read-only", b.URL(name), b.loc.Scheme)
	}
	return d.delete(ctx, b.root+name)
}

// Upload is a multipart upload begun and never completed or aborted: its parts take
// space in the store (and are billed) but no object shows them.
type Upload struct {
	Name      string // the object it would have made, relative to the bucket's root
	ID        string
	Initiated time.Time
}

type uploader interface {
	uploads(ctx context.Context, prefix string) ([]Upload, error)
	abort(ctx context.Context, key, id string) error
}

// Uploads lists the unfinished multipart uploads under the bucket's root whose names
// start with prefix. Stores without multipart uploads (local, HTTP) have none; an S3
// store that does not list them gives an error wrapping [ErrNoUploadList].
func (b *Bucket) Uploads(ctx context.Context, prefix string) ([]Upload, error) {
	u, ok := b.be.(uploader)
	if !ok {
		return nil, nil
	}
	ups, err := u.uploads(ctx, b.root+prefix)
	for i := range ups {
		ups[i].Name = strings.TrimPrefix(ups[i].Name, b.root)
	}
	return ups, err
}

// AbortUpload aborts an unfinished multipart upload, freeing its parts.
func (b *Bucket) AbortUpload(ctx context.Context, up Upload) error {
	u, ok := b.be.(uploader)
	if !ok {
		return fmt.Errorf("objstore: %s: %s has no multipart uploads", b.URL(up.Name), b.loc.Scheme)
	}
	return u.abort(ctx, b.root+up.Name, up.ID)
}
