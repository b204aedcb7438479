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
// Labels are either class indices or class names. In CSV, when every label is a
// non-negative integer (below 2^22) they are indices, used as they are (Classes are then
// "0" to the largest); when any is not, all are names ("2019" included), sorted and
// numbered from 0 like an ImageFolder's class folders. In JSONL a number is an index and a
// string a name, and a file mixing the two is refused. A CSV file's first line is a header,
// and skipped, when its path is not an image file name and its label is not an integer
// (e.g. "path,label").
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
	if err == nil && m.Len() == 0 {
		err = fmt.Errorf("pipeline: manifest %s: no samples", name)
	}
	if err == nil {
		err = m.number()
	}
	if err != nil {
		return nil, err
	}
	m.trim()
	return &m.fsSource, nil
}

// maxLabel bounds an integer label: Classes holds one name per index up to the largest.
const maxLabel = 1<<22 - 1

// manifest is the state of reading one. While reading, a sample's label is the index of
// its label's text in texts; number turns those into class indices.
type manifest struct {
	fsSource
	name  string
	ids   map[string]int // label text -> its index in texts
	texts []labelText
	names bool // some label is a name (CSV: not an integer; JSONL: a string)
	ints  int  // JSONL: the line of the first number label, 0 if none
}

type labelText struct {
	text string
	line int // where it first appears
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
		_, err = strconv.Atoi(label)
		if line == 1 && !IsImageName(p) && err != nil {
			continue // a header such as "path,label"
		}
		m.names = m.names || err != nil
		if err := m.add(p, label, line); err != nil {
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
		var text string
		var n int
		switch {
		case json.Unmarshal(rec.Label, &text) == nil:
			if m.ints > 0 {
				return fmt.Errorf("pipeline: manifest %s line %d: label %s is a class name but line %d's is an integer; use integers or class names throughout", m.name, line, rec.Label, m.ints)
			}
			m.names = true
		case json.Unmarshal(rec.Label, &n) == nil:
			if m.names {
				return fmt.Errorf("pipeline: manifest %s line %d: label %d is an integer but earlier labels are class names; use integers or class names throughout", m.name, line, n)
			}
			if m.ints == 0 {
				m.ints = line
			}
			text = strconv.Itoa(n)
		default:
			return fmt.Errorf("pipeline: manifest %s line %d: label %s is neither an integer nor a class name", m.name, line, rec.Label)
		}
		if err := m.add(*rec.Path, text, line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("pipeline: manifest %s: %w", m.name, err)
	}
	return nil
}

// add adds one sample whose label's text is label.
func (m *manifest) add(p, label string, line int) error {
	if p == "" || path.IsAbs(p) || !fs.ValidPath(path.Clean(p)) {
		return fmt.Errorf("pipeline: manifest %s line %d: path %q must be relative, inside the manifest's directory", m.name, line, p)
	}
	if label == "" {
		return fmt.Errorf("pipeline: manifest %s line %d: empty label", m.name, line)
	}
	id, ok := m.ids[label]
	if !ok {
		id = len(m.texts)
		m.ids[label] = id
		m.texts = append(m.texts, labelText{label, line})
	}
	return m.index.add(path.Clean(p), id)
}

// number sets Classes and turns every sample's label into its class index: names sorted
// and numbered from 0, or integers as they are.
func (m *manifest) number() error {
	remap := make([]int32, len(m.texts))
	if m.names {
		m.classes = make([]string, 0, len(m.texts))
		for _, t := range m.texts {
			m.classes = append(m.classes, t.text)
		}
		slices.Sort(m.classes)
		for id, t := range m.texts {
			label, _ := slices.BinarySearch(m.classes, t.text)
			remap[id] = int32(label)
		}
	} else {
		top := 0
		for id, t := range m.texts {
			n, _ := strconv.Atoi(t.text) // every text is an integer
			if n < 0 {
				return fmt.Errorf("pipeline: manifest %s line %d: negative label %d", m.name, t.line, n)
			}
			if n > maxLabel {
				return fmt.Errorf("pipeline: manifest %s line %d: label %d is above the largest class index, %d; use class names for such labels", m.name, t.line, n, maxLabel)
			}
			remap[id] = int32(n)
			top = max(top, n)
		}
		m.classes = make([]string, top+1)
		for i := range m.classes {
			m.classes[i] = strconv.Itoa(i)
		}
	}
	for i, l := range m.labels {
		m.labels[i] = remap[l]
	}
	return nil
}
