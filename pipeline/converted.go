package pipeline

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/conveyor-ml/conveyor/cache"
)

// Converted is a dataset that Convert (conveyor convert) stored in a cache directory: a
// PixelSource. Its samples are pixels already resized first, so a Loader over it reads and
// unpacks records instead of decoding files, and its Config.Decode is not used.
type Converted struct {
	cache *cache.Cache
	info  *cache.Info
	refs  []cache.Ref
}

// OpenConverted opens the converted dataset in dir, read-only. Its samples are the
// records stored under the dataset's spec, one per source path, in path order.
func OpenConverted(dir string) (*Converted, error) {
	info, err := cache.ReadInfo(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("pipeline: %s is not a converted dataset (no %s): %w", dir, cache.InfoName, err)
		}
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	c, err := cache.Open(dir, &cache.Options{ReadOnly: true, Codec: info.Codec})
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	refs := c.Records(info.Spec)
	if len(refs) == 0 {
		c.Close()
		return nil, fmt.Errorf("pipeline: %s holds no samples for its spec %q", dir, info.Spec)
	}
	if n := len(info.Classes); n > 0 {
		for _, r := range refs {
			if int(r.Label) >= n || r.Label < 0 {
				c.Close()
				return nil, fmt.Errorf("pipeline: %s: label %d of %s outside its %d classes", dir, r.Label, r.Path, n)
			}
		}
	}
	return &Converted{cache: c, info: info, refs: refs}, nil
}

// Len is the number of samples.
func (s *Converted) Len() int { return len(s.refs) }

// Label is sample i's class label.
func (s *Converted) Label(i int) int { return int(s.refs[i].Label) }

// Path is sample i's source path, relative to the directory it was converted from.
func (s *Converted) Path(i int) string { return s.refs[i].Path }

// Stored returns the record holding sample i's pixels.
func (s *Converted) Stored(i int) (*cache.Cache, cache.Ref, bool) { return s.cache, s.refs[i], true }

// Classes returns the class names, index = label.
func (s *Converted) Classes() []string { return s.info.Classes }

// Info describes the dataset.
func (s *Converted) Info() cache.Info { return *s.info }

// Ref is sample i's record.
func (s *Converted) Ref(i int) cache.Ref { return s.refs[i] }

// Cache is the underlying cache, opened read-only.
func (s *Converted) Cache() *cache.Cache { return s.cache }

// Close closes the dataset's files. Close the Loaders using it first.
func (s *Converted) Close() error { return s.cache.Close() }
