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

// Info describes a dataset converted into a cache directory (conveyor convert): the
// spec its records were stored under and the class names their labels index.
type Info struct {
	FormatVersion int       `json:"format_version"`
	Spec          string    `json:"spec"`
	Codec         Codec     `json:"codec"`
	Source        string    `json:"source"`            // the directory it was converted from
	Classes       []string  `json:"classes,omitempty"` // index = label
	Samples       int       `json:"samples"`           // source files listed
	Stored        int       `json:"stored"`            // records stored for them
	Bad           int       `json:"bad"`               // files that failed to decode
	Complete      bool      `json:"complete"`          // every listed file was visited
	Updated       time.Time `json:"updated"`
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
	if info.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("cache: %s: format version %d, want %d", filepath.Join(dir, InfoName), info.FormatVersion, FormatVersion)
	}
	if info.Spec == "" {
		return nil, errors.New("cache: " + filepath.Join(dir, InfoName) + ": no spec")
	}
	return &info, nil
}
