package source

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/conveyor-ml/conveyor/pipeline"
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
//
// Multi-label samples: in CSV, a label cell lists several labels separated by ';'
// ("a.jpg,cat;dog"); in JSONL, "labels": [...] replaces "label" and may be empty (a
// sample with no label). The integer-or-name rules apply to every label of the file. The
// result is then a MultiLabelSource: its batches carry multi-hot Targets, and Label is a
// sample's smallest label, -1 when it has none. A label may not repeat within a row.
//
// Metadata: further CSV columns and further JSONL fields are per-sample metadata, a
// MetadataSource. CSV columns are keyed by the header's names (without a header, by
// their positions from 0: "2", "3", …), and every row has every column. JSONL values that
// are strings are their text; other values (numbers, objects) their JSON; null is no
// value.
//
// A UTF-8 byte order mark at the start of the file is skipped. A path may have at most
// 4096 bytes (PATH_MAX) and a JSONL line at most 1 MiB. Errors name the file and line.
func Manifest(fsys fs.FS, name string) (pipeline.FileSource, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("source: manifest: %w", err)
	}
	defer f.Close()
	m := &manifest{name: name, ids: map[string]int{}}
	m.fsSource = fsSource{tree: fsTree{fsys, path.Dir(name)}, desc: "manifest:" + name}
	r := bufio.NewReaderSize(f, 1<<16)
	if bom, _ := r.Peek(len(utf8BOM)); string(bom) == utf8BOM {
		r.Discard(len(utf8BOM)) // as spreadsheets and Windows editors write UTF-8
	}
	ext := strings.ToLower(path.Ext(name))
	if ext == ".jsonl" || ext == ".ndjson" {
		err = m.readJSONL(r)
	} else {
		err = m.readCSV(r)
	}
	if err == nil {
		m.meta.finish(m.Len())
	}
	if err == nil && m.Len() == 0 {
		err = fmt.Errorf("source: manifest %s: no samples", name)
	}
	if err == nil {
		err = m.number()
	}
	if err != nil {
		return nil, err
	}
	m.trim()
	m.multi.clip()
	m.meta.clip()
	return &m.manifestSource, nil
}

// manifestSource is a manifest's samples: an index of paths and (first) labels, plus
// every label of multi-label samples and the metadata, each only when the file has any.
type manifestSource struct {
	fsSource
	multi labelTable // empty: one label each
	meta  metaTable
}

// MultiLabel reports whether some sample has other than one label.
func (m *manifestSource) MultiLabel() bool { return m.multi.ends != nil }

// Labels appends sample i's labels, ascending, to dst.
func (m *manifestSource) Labels(dst []int, i int) []int {
	if m.multi.ends == nil {
		return append(dst, m.Label(i))
	}
	return m.multi.appendTo(dst, i)
}

// MetadataKeys lists the metadata keys: CSV columns after the label, in column order;
// JSONL fields other than path and label(s), in order of first appearance (sorted within
// a line).
func (m *manifestSource) MetadataKeys() []string { return m.meta.keys }

// Metadata returns sample i's value under key.
func (m *manifestSource) Metadata(i int, key string) ([]byte, bool) { return m.meta.get(i, key) }

// maxLabel bounds an integer label: Classes holds one name per index up to the largest.
const maxLabel = 1<<22 - 1

// maxPathBytes bounds a manifest's path, as PATH_MAX does on Linux: a path travels in
// every error and log line about its sample, and a bad sample's may be logged up to 64
// times as replacements are drawn.
const maxPathBytes = 4096

// maxJSONLLine bounds a JSONL manifest's line.
const maxJSONLLine = 1 << 20

const utf8BOM = "\uFEFF"

// manifest is the state of reading one. While reading, a sample's label is the index of
// its label's text in texts; number turns those into class indices.
type manifest struct {
	manifestSource
	name  string
	ids   map[string]int // label text -> its index in texts
	texts []labelText
	names bool // some label is a name (CSV: not an integer; JSONL: a string)
	ints  int  // JSONL: the line of the first number label, 0 if none
	many  bool // some sample has other than one label
}

type labelText struct {
	text string
	line int // where it first appears
}

func (m *manifest) readCSV(r io.Reader) error {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 0 // every row has the first row's columns
	cr.ReuseRecord = true
	var labels []string
	line := 0 // where the record read last starts, as the file's lines count (a quoted field may span several)
	for first := true; ; first = false {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) { // it names the line
				return fmt.Errorf("source: manifest %s: %w", m.name, err)
			}
			return fmt.Errorf("source: manifest %s after line %d: %w", m.name, line, err)
		}
		line, _ = cr.FieldPos(0)
		if len(rec) < 2 {
			return fmt.Errorf("source: manifest %s line %d: want \"path,label\" (and metadata columns after them), got %d column", m.name, line, len(rec))
		}
		p, label := strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1])
		if first {
			_, err = strconv.Atoi(label)
			header := !IsImageName(p) && err != nil // such as "path,label"
			if err := m.csvKeys(rec[2:], header); err != nil {
				return err
			}
			if header {
				continue
			}
		}
		labels = labels[:0]
		for _, l := range strings.Split(label, ";") {
			l = strings.TrimSpace(l)
			if l == "" && label != "" {
				return fmt.Errorf("source: manifest %s line %d: empty label in the list %q", m.name, line, label)
			}
			if _, err := strconv.Atoi(l); err != nil {
				m.names = true
			}
			labels = append(labels, l)
		}
		if err := m.add(p, labels, line); err != nil {
			return err
		}
		for k, v := range rec[2:] {
			addField(&m.meta, k, v)
		}
		if err := m.endMeta(line); err != nil {
			return err
		}
	}
}

// csvKeys sets the metadata keys of a CSV file's columns after the label: the header's
// names, or the columns' positions.
func (m *manifest) csvKeys(cols []string, header bool) error {
	for k, c := range cols {
		key := strconv.Itoa(k + 2)
		if header {
			key = strings.TrimSpace(c)
		}
		if key == "" {
			return fmt.Errorf("source: manifest %s line 1: column %d has no name", m.name, k+3)
		}
		if _, dup := m.meta.keyID[key]; dup {
			return fmt.Errorf("source: manifest %s line 1: column %q appears twice", m.name, key)
		}
		m.meta.key(key)
	}
	return nil
}

// endMeta ends the metadata of the sample just added.
func (m *manifest) endMeta(line int) error {
	if err := m.meta.endSample(m.Len() - 1); err != nil {
		return fmt.Errorf("source: manifest %s line %d: %w", m.name, line, err)
	}
	return nil
}

// foldKeys renames keys that spell path, label or labels in another case to their lower
// case, as encoding/json matches a struct's fields (and as earlier versions, which read
// these three into a struct, accepted "Path" or "LABEL"); other keys, metadata, keep their
// case. Two spellings of one of them in a record are ambiguous.
func foldKeys(rec map[string]json.RawMessage) error {
	for k, v := range rec {
		for _, name := range [...]string{"path", "label", "labels"} {
			if k == name || !strings.EqualFold(k, name) {
				continue
			}
			if _, dup := rec[name]; dup {
				return fmt.Errorf("both %q and %q", name, k)
			}
			delete(rec, k)
			rec[name] = v
		}
	}
	return nil
}

func (m *manifest) readJSONL(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), maxJSONLLine)
	rec := map[string]json.RawMessage{}
	var labels []string
	var extra []string
	line := 1
	for ; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		clear(rec)
		if err := json.Unmarshal(b, &rec); err != nil {
			return fmt.Errorf("source: manifest %s line %d: %w", m.name, line, err)
		}
		if err := foldKeys(rec); err != nil {
			return fmt.Errorf("source: manifest %s line %d: %w", m.name, line, err)
		}
		var p string
		one, list := rec["label"], rec["labels"]
		if json.Unmarshal(rec["path"], &p) != nil || rec["path"] == nil || (one == nil) == (list == nil) {
			return fmt.Errorf("source: manifest %s line %d: want {\"path\": ..., \"label\": ...} or {\"path\": ..., \"labels\": [...]}", m.name, line)
		}
		labels = labels[:0]
		if one != nil {
			text, err := m.jsonLabel(one, line)
			if err != nil {
				return err
			}
			labels = append(labels, text)
		} else {
			var items []json.RawMessage
			if err := json.Unmarshal(list, &items); err != nil {
				return fmt.Errorf("source: manifest %s line %d: labels %s is not a list", m.name, line, list)
			}
			for _, it := range items {
				text, err := m.jsonLabel(it, line)
				if err != nil {
					return err
				}
				labels = append(labels, text)
			}
		}
		if err := m.add(p, labels, line); err != nil {
			return err
		}
		extra = extra[:0]
		for k := range rec {
			if k != "path" && k != "label" && k != "labels" {
				extra = append(extra, k)
			}
		}
		slices.Sort(extra)
		for _, k := range extra {
			v := rec[k]
			var text string
			switch {
			case string(v) == "null":
				continue
			case json.Unmarshal(v, &text) == nil:
				addField(&m.meta, m.meta.key(k), text)
			default:
				addField(&m.meta, m.meta.key(k), []byte(v))
			}
		}
		if err := m.endMeta(line); err != nil {
			return err
		}
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("source: manifest %s line %d: longer than %d bytes", m.name, line, maxJSONLLine)
	} else if err != nil {
		return fmt.Errorf("source: manifest %s line %d: %w", m.name, line, err)
	}
	return nil
}

// jsonLabel returns the text of one JSONL label, enforcing integers or names throughout.
func (m *manifest) jsonLabel(v json.RawMessage, line int) (string, error) {
	var text string
	var n int
	switch {
	case json.Unmarshal(v, &text) == nil:
		if m.ints > 0 {
			return "", fmt.Errorf("source: manifest %s line %d: label %s is a class name but line %d's is an integer; use integers or class names throughout", m.name, line, v, m.ints)
		}
		m.names = true
		return text, nil
	case json.Unmarshal(v, &n) == nil:
		if m.names {
			return "", fmt.Errorf("source: manifest %s line %d: label %d is an integer but earlier labels are class names; use integers or class names throughout", m.name, line, n)
		}
		if m.ints == 0 {
			m.ints = line
		}
		return strconv.Itoa(n), nil
	}
	return "", fmt.Errorf("source: manifest %s line %d: label %s is neither an integer nor a class name", m.name, line, v)
}

// add adds one sample whose labels' texts are labels. While reading, every sample's label
// text indices are in m.multi (number keeps them only for a multi-label file), and its
// index label is its first one's, or -1.
func (m *manifest) add(p string, labels []string, line int) error {
	if len(p) > maxPathBytes {
		return fmt.Errorf("source: manifest %s line %d: path %q has %d bytes, more than %d", m.name, line, abbrevBytes([]byte(p[:41])), len(p), maxPathBytes)
	}
	if p == "" || path.IsAbs(p) || !fs.ValidPath(path.Clean(p)) {
		return fmt.Errorf("source: manifest %s line %d: path %q must be relative, inside the manifest's directory", m.name, line, p)
	}
	if slices.Contains(labels, "") {
		return fmt.Errorf("source: manifest %s line %d: empty label", m.name, line)
	}
	if len(labels) != 1 {
		m.many = true
	}
	first := -1
	for k, label := range labels {
		id, ok := m.ids[label]
		if !ok {
			id = len(m.texts)
			m.ids[label] = id
			m.texts = append(m.texts, labelText{label, line})
		}
		if slices.Contains(labels[:k], label) {
			return fmt.Errorf("source: manifest %s line %d: label %q appears twice", m.name, line, label)
		}
		if k == 0 {
			first = id
		}
		m.multi.push(int32(id))
	}
	if err := m.multi.end(); err != nil {
		return fmt.Errorf("source: manifest %s line %d: %w", m.name, line, err)
	}
	return m.index.add(path.Clean(p), first)
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
				return fmt.Errorf("source: manifest %s line %d: negative label %d", m.name, t.line, n)
			}
			if n > maxLabel {
				return fmt.Errorf("source: manifest %s line %d: label %d is above the largest class index, %d; use class names for such labels", m.name, t.line, n, maxLabel)
			}
			remap[id] = int32(n)
			top = max(top, n)
		}
		m.classes = make([]string, top+1)
		for i := range m.classes {
			m.classes[i] = strconv.Itoa(i)
		}
	}
	if !m.many {
		for i, l := range m.labels {
			m.labels[i] = remap[l]
		}
		m.multi = labelTable{}
		return nil
	}
	for i := range m.multi.ends {
		ls := m.multi.of(i)
		for k, l := range ls {
			ls[k] = remap[l]
		}
		slices.Sort(ls)
		m.labels[i] = -1
		if len(ls) > 0 {
			m.labels[i] = ls[0]
		}
	}
	return nil
}
