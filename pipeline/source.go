package pipeline

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Source is an indexed dataset of encoded images with integer labels.
// Implementations must be safe for concurrent use.
type Source interface {
	// Len is the number of samples.
	Len() int
	// Label is sample i's class label.
	Label(i int) int
	// Path names sample i in messages (relative to the source's root).
	Path(i int) string
	// Open opens sample i's encoded bytes. The loader calls Stat on the result to learn
	// the size before it reserves memory, then reads it whole.
	Open(i int) (fs.File, error)
}

// Classer is implemented by sources that know their class names, index = label.
type Classer interface {
	Classes() []string
}

// imageExts are the extensions listing accepts (case-insensitive), as torchvision's
// IMG_EXTENSIONS minus the netpbm formats. Decoding sniffs content, so the extension only
// decides what is listed, not how it is decoded.
var imageExts = []string{".jpg", ".jpeg", ".png", ".gif", ".bmp", ".tif", ".tiff", ".webp"}

// IsImageName reports whether name has an image file extension.
func IsImageName(name string) bool {
	ext := strings.ToLower(path.Ext(name))
	return slices.Contains(imageExts, ext)
}

// index stores sample paths and labels compactly: one byte arena of paths, an offset per
// sample and a label per sample, so a 1,000,000-sample manifest costs the path bytes plus
// 8 bytes a sample (see TestIndexBytesPerSample), not a string header and slice of each.
type index struct {
	arena  []byte
	ends   []uint32 // ends[i] is the end of path i in arena; path i starts at ends[i-1]
	labels []int32
}

func (x *index) add(p string, label int) error {
	if len(x.arena)+len(p) > 1<<32-1 {
		return errors.New("pipeline: index larger than 4 GiB of paths")
	}
	if label < 0 || label > 1<<31-1 {
		return fmt.Errorf("pipeline: label %d of %q out of range", label, p)
	}
	x.arena = append(x.arena, p...)
	x.ends = append(x.ends, uint32(len(x.arena)))
	x.labels = append(x.labels, int32(label))
	return nil
}

func (x *index) Len() int        { return len(x.ends) }
func (x *index) Label(i int) int { return int(x.labels[i]) }
func (x *index) Path(i int) string {
	var start uint32
	if i > 0 {
		start = x.ends[i-1]
	}
	return string(x.arena[start:x.ends[i]])
}

// trim releases the slack capacity left by appending.
func (x *index) trim() {
	x.arena = slices.Clip(x.arena)
	x.ends = slices.Clip(x.ends)
	x.labels = slices.Clip(x.labels)
}

// bytes is the index's own memory.
func (x *index) bytes() int64 {
	return int64(cap(x.arena)) + 4*int64(cap(x.ends)) + 4*int64(cap(x.labels))
}

// fsSource is an index of paths inside an fs.FS.
type fsSource struct {
	index
	fsys    fs.FS
	root    string // directory inside fsys the paths are relative to
	classes []string
	desc    string
}

func (s *fsSource) Open(i int) (fs.File, error) {
	return s.fsys.Open(path.Join(s.root, s.Path(i)))
}

func (s *fsSource) Classes() []string { return s.classes }

func (s *fsSource) String() string { return s.desc }

// ImageFolder lists an ImageFolder tree: every first-level directory of root is a class,
// classes are sorted by name and numbered from 0, and every image file below a class
// directory (at any depth, by extension, case-insensitive) is a sample of that class.
// Files directly in root are ignored. Samples are ordered by class, then path.
//
// fsys may be os.DirFS, an embed.FS, a *zip.Reader or any other fs.FS; root is "." for
// the whole file system.
func ImageFolder(fsys fs.FS, root string) (Source, error) {
	ents, err := fs.ReadDir(fsys, root)
	if err != nil {
		return nil, fmt.Errorf("pipeline: image folder: %w", err)
	}
	s := &fsSource{fsys: fsys, root: root, desc: "imagefolder:" + root}
	for _, e := range ents {
		if isDir(fsys, root, e) && !strings.HasPrefix(e.Name(), ".") {
			s.classes = append(s.classes, e.Name())
		}
	}
	slices.Sort(s.classes)
	if len(s.classes) == 0 {
		return nil, fmt.Errorf("pipeline: image folder %q: no class directories", root)
	}
	for label, c := range s.classes {
		err := fs.WalkDir(fsys, path.Join(root, c), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p != path.Join(root, c) && strings.HasPrefix(d.Name(), ".") {
					return fs.SkipDir
				}
				return nil
			}
			if !IsImageName(p) {
				return nil
			}
			rel := strings.TrimPrefix(p, root+"/")
			if root == "." {
				rel = p
			}
			return s.add(rel, label)
		})
		if err != nil {
			return nil, fmt.Errorf("pipeline: image folder: %w", err)
		}
	}
	if s.Len() == 0 {
		return nil, fmt.Errorf("pipeline: image folder %q: no image files (extensions %v)", root, imageExts)
	}
	s.trim()
	return s, nil
}

// isDir follows a symbolic link to a directory, as torchvision's os.scandir walk does.
func isDir(fsys fs.FS, root string, e fs.DirEntry) bool {
	if e.IsDir() {
		return true
	}
	if e.Type()&fs.ModeSymlink == 0 {
		return false
	}
	fi, err := fs.Stat(fsys, path.Join(root, e.Name()))
	return err == nil && fi.IsDir()
}

// Dir opens the ImageFolder tree at dir on the local file system.
func Dir(dir string) (Source, error) {
	return ImageFolder(os.DirFS(dir), ".")
}

// Manifest reads a list of samples from the file name inside fsys: CSV lines of
// "path,label" (an optional first header line is skipped) or, when name ends in .jsonl or
// .ndjson, JSON objects {"path": ..., "label": ...} one per line. Paths are relative to
// the manifest's directory and use forward slashes. Labels are non-negative integers.
func Manifest(fsys fs.FS, name string) (Source, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("pipeline: manifest: %w", err)
	}
	defer f.Close()
	s := &fsSource{fsys: fsys, root: path.Dir(name), desc: "manifest:" + name}
	ext := strings.ToLower(path.Ext(name))
	if ext == ".jsonl" || ext == ".ndjson" {
		err = s.readJSONL(f, name)
	} else {
		err = s.readCSV(f, name)
	}
	if err != nil {
		return nil, err
	}
	if s.Len() == 0 {
		return nil, fmt.Errorf("pipeline: manifest %s: no samples", name)
	}
	s.trim()
	return s, nil
}

func (s *fsSource) readCSV(r io.Reader, name string) error {
	cr := csv.NewReader(bufio.NewReaderSize(r, 1<<16))
	cr.FieldsPerRecord = 2
	cr.ReuseRecord = true
	for line := 1; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("pipeline: manifest %s: %w", name, err)
		}
		label, err := strconv.Atoi(strings.TrimSpace(rec[1]))
		if err != nil {
			if line == 1 {
				continue // a header such as "path,label"
			}
			return fmt.Errorf("pipeline: manifest %s line %d: label %q is not an integer", name, line, rec[1])
		}
		if err := s.addManifest(strings.TrimSpace(rec[0]), label, name, line); err != nil {
			return err
		}
	}
}

func (s *fsSource) readJSONL(r io.Reader, name string) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	var rec struct {
		Path  *string `json:"path"`
		Label *int    `json:"label"`
	}
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		rec.Path, rec.Label = nil, nil
		if err := json.Unmarshal(b, &rec); err != nil {
			return fmt.Errorf("pipeline: manifest %s line %d: %w", name, line, err)
		}
		if rec.Path == nil || rec.Label == nil {
			return fmt.Errorf("pipeline: manifest %s line %d: want {\"path\": ..., \"label\": ...}", name, line)
		}
		if err := s.addManifest(*rec.Path, *rec.Label, name, line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("pipeline: manifest %s: %w", name, err)
	}
	return nil
}

func (s *fsSource) addManifest(p string, label int, name string, line int) error {
	if p == "" || path.IsAbs(p) || !fs.ValidPath(path.Clean(p)) {
		return fmt.Errorf("pipeline: manifest %s line %d: path %q must be relative, inside the manifest's directory", name, line, p)
	}
	if label < 0 {
		return fmt.Errorf("pipeline: manifest %s line %d: negative label %d", name, line, label)
	}
	return s.add(path.Clean(p), label)
}
