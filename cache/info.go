package cache

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// InfoName is the file, in a cache directory, that describes a converted dataset.
const InfoName = "dataset.json"

// InfoVersion is the version of dataset.json this package writes. Version 2 added the
// manifest (Shards) and Stopped; ReadInfo reads version 1 files (no "version" field) too,
// whose Manifested is false.
const InfoVersion = 2

// Info describes a dataset converted into a cache directory (conveyor convert): the
// spec its records were stored under, the class names their labels index, whether the
// conversion finished, and what it left in the directory (Shards), so that damage or
// loss is found rather than silently training on less.
type Info struct {
	Version       int       `json:"version"` // InfoVersion when written; 0 in version 1 files
	FormatVersion int       `json:"format_version"`
	Spec          string    `json:"spec"`
	Codec         Codec     `json:"codec"`
	Source        string    `json:"source"`            // the directory it was converted from
	Classes       []string  `json:"classes,omitempty"` // index = label
	Samples       int       `json:"samples"`           // source files listed
	Stored        int       `json:"stored"`            // records stored for them
	Bad           int       `json:"bad"`               // files that failed to decode
	Complete      bool      `json:"complete"`          // every listed file was visited
	Stopped       string    `json:"stopped,omitempty"` // why the last run ended early
	Updated       time.Time `json:"updated"`
	// Shards is the manifest: every shard holding records of Spec when the last run
	// ended, with its size, record count and the checksums of its header and index.
	// It is nil while a conversion runs (and in version 1 files).
	Shards []ShardManifest `json:"shards"`
}

// Manifested reports whether info records the dataset's shards, so that CheckDataset
// and VerifyDataset can tell a lost or damaged shard from one never written.
func (info *Info) Manifested() bool {
	return info != nil && info.Version >= 2 && info.Shards != nil
}

// WriteInfo replaces dir's Info atomically.
func WriteInfo(dir string, info *Info) error {
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, InfoName+".tmp*")
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Chmod(0o644) // CreateTemp makes it private; a dataset is shared
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, InfoName))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cache: writing %s: %w", InfoName, err)
	}
	return nil
}

// ReadInfo reads dir's Info; the error wraps fs.ErrNotExist when dir holds none.
func ReadInfo(dir string) (*Info, error) {
	b, err := os.ReadFile(filepath.Join(dir, InfoName))
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	var info Info
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, fmt.Errorf("cache: %s: %w", filepath.Join(dir, InfoName), err)
	}
	if info.Version > InfoVersion {
		return nil, fmt.Errorf("cache: %s: version %d, written by a newer conveyor (this one reads up to %d)", filepath.Join(dir, InfoName), info.Version, InfoVersion)
	}
	if info.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("cache: %s: format version %d, want %d", filepath.Join(dir, InfoName), info.FormatVersion, FormatVersion)
	}
	if info.Spec == "" {
		return nil, errors.New("cache: " + filepath.Join(dir, InfoName) + ": no spec")
	}
	return &info, nil
}
