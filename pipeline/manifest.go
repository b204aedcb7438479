package pipeline

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Manifest reads a list of samples from the file name inside fsys: CSV lines of
// "path,label" or, when name ends in .jsonl or .ndjson, JSON objects
// {"path": ..., "label": ...} one per line. Paths are relative to the manifest's directory
// and use forward slashes.
//
// Labels are either all non-negative integers, used as they are (Classes are then "0" to
// the largest label), or all class names, which are sorted and numbered from 0 like an
// ImageFolder's class folders; a manifest mixing the two is refused. A CSV file's first
// line is a header, and skipped, when its path is not an image file name and its label is
// not an integer (e.g. "path,label").
func Manifest(fsys fs.FS, name string) (FileSource, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("pipeline: manifest: %w", err)
	}
	defer f.Close()
	m := &manifest{fsSource: fsSource{tree: fsTree{fsys, path.Dir(name)}, desc: "manifest:" + name}, name: name, ids: map[string]int{}}
	ext := strings.ToLower(path.Ext(name))
	if ext == ".jsonl" || ext == ".ndjson" {
		err = m.readJSONL(f)
	} else {
		err = m.readCSV(f)
	}
	if err != nil {
		return nil, err
	}
	if m.Len() == 0 {
		return nil, fmt.Errorf("pipeline: manifest %s: no samples", name)
	}
	m.number()
	m.trim()
	return &m.fsSource, nil
}

// manifest is the state of reading one.
type manifest struct {
	fsSource
	name  string
	names bool           // labels are class names; decided by the first sample
	ids   map[string]int // class name -> provisional label, in order of appearance
	max   int            // largest integer label
}

func (m *manifest) readCSV(r io.Reader) error {
	cr := csv.NewReader(bufio.NewReaderSize(r, 1<<16))
	cr.FieldsPerRecord = 2
	cr.ReuseRecord = true
	for line := 1; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("pipeline: manifest %s: %w", m.name, err)
		}
		p, label := strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1])
		if line == 1 && !IsImageName(p) {
			if _, err := strconv.Atoi(label); err != nil {
				continue // a header such as "path,label"
			}
		}
		// Once labels are names, one that looks like a number is a name too ("2019").
		n, err := strconv.Atoi(label)
		if err := m.add(p, label, n, err != nil || m.names && m.Len() > 0, line); err != nil {
			return err
		}
	}
}

func (m *manifest) readJSONL(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	var rec struct {
		Path  *string         `json:"path"`
		Label json.RawMessage `json:"label"`
	}
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		rec.Path, rec.Label = nil, nil
		if err := json.Unmarshal(b, &rec); err != nil {
			return fmt.Errorf("pipeline: manifest %s line %d: %w", m.name, line, err)
		}
		if rec.Path == nil || rec.Label == nil {
			return fmt.Errorf("pipeline: manifest %s line %d: want {\"path\": ..., \"label\": ...}", m.name, line)
		}
		var name string
		var n int
		isName := json.Unmarshal(rec.Label, &name) == nil
		if !isName && json.Unmarshal(rec.Label, &n) != nil {
			return fmt.Errorf("pipeline: manifest %s line %d: label %s is neither an integer nor a class name", m.name, line, rec.Label)
		}
		if err := m.add(*rec.Path, name, n, isName, line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("pipeline: manifest %s: %w", m.name, err)
	}
	return nil
}

// add adds one sample whose label is the class name name (isName) or the integer n.
func (m *manifest) add(p, name string, n int, isName bool, line int) error {
	if p == "" || path.IsAbs(p) || !fs.ValidPath(path.Clean(p)) {
		return fmt.Errorf("pipeline: manifest %s line %d: path %q must be relative, inside the manifest's directory", m.name, line, p)
	}
	if m.Len() == 0 {
		m.names = isName
	}
	switch {
	case isName != m.names && m.names:
		return fmt.Errorf("pipeline: manifest %s line %d: label %d is an integer but earlier labels are class names; use integers or class names throughout", m.name, line, n)
	case isName != m.names:
		return fmt.Errorf("pipeline: manifest %s line %d: label %q is not an integer but earlier labels are; use integers or class names throughout", m.name, line, name)
	case isName && name == "":
		return fmt.Errorf("pipeline: manifest %s line %d: empty label", m.name, line)
	case isName:
		id, ok := m.ids[name]
		if !ok {
			id = len(m.ids)
			m.ids[name] = id
		}
		n = id
	case n < 0:
		return fmt.Errorf("pipeline: manifest %s line %d: negative label %d", m.name, line, n)
	default:
		m.max = max(m.max, n)
	}
	return m.index.add(path.Clean(p), n)
}

// number sets Classes and, for class names, renumbers labels in sorted name order.
func (m *manifest) number() {
	if !m.names {
		m.classes = make([]string, m.max+1)
		for i := range m.classes {
			m.classes[i] = strconv.Itoa(i)
		}
		return
	}
	m.classes = make([]string, 0, len(m.ids))
	for name := range m.ids {
		m.classes = append(m.classes, name)
	}
	slices.Sort(m.classes)
	remap := make([]int32, len(m.ids))
	for label, name := range m.classes {
		remap[m.ids[name]] = int32(label)
	}
	for i, l := range m.labels {
		m.labels[i] = remap[l]
	}
}
