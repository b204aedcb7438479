package source

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/conveyor-ml/conveyor/internal/files"
	"github.com/conveyor-ml/conveyor/objstore"
)

// wdsShard is one shard's samples as indexing found them, before labels are numbered.
type wdsShard struct {
	mod     time.Time
	bytes   int64 // the shard file's size
	keys    []string
	off     []int64
	size    []int64
	imgExt  []uint8
	bad     map[int]string
	labels  [][]wdsLabel // nil entry: no label member
	meta    [][]wdsMeta
	names   map[string]bool // class names used
	hasInt  bool            // some label is an integer
	where   [2]string       // a member with a name label and one with an integer label, for errors
	dropped int             // metadata members over MaxMetadataBytes
}

type wdsLabel struct {
	name string // a class name; "" for an integer
	n    int
}

type wdsMeta struct {
	key  string
	data []byte
}

// wdsSample is the sample indexShard is collecting.
type wdsSample struct {
	key    string
	exts   []string
	img    int // index into wdsImageExts, -1: none yet
	off    int64
	size   int64
	bad    string
	cls    []wdsLabel
	hasCls bool
	json   []wdsLabel
	multi  bool
	meta   []wdsMeta
}

// posReader counts the position in the shard, which tar.Reader does not expose: after
// Next returns a header, it is the member's data offset (tar reads headers in whole
// blocks and buffers nothing ahead).
type posReader struct {
	r   io.Reader
	pos int64
	err error // the last read error other than io.EOF: the file failed, not the format
}

func (p *posReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.pos += int64(n)
	if err != nil && err != io.EOF {
		p.err = err
	}
	return n, err
}

// seekPosReader lets tar skip image data with Seek when the shard file can.
type seekPosReader struct {
	posReader
	s io.Seeker
}

func (p *seekPosReader) Seek(off int64, whence int) (int64, error) {
	n, err := p.s.Seek(off, whence)
	if err == nil {
		p.pos = n
	}
	return n, err
}

// contextOpener is a file system whose Open may wait and can be given up: objstore's
// shard cache, which fetches a remote shard before it opens.
type contextOpener interface {
	OpenContext(ctx context.Context, name string) (*objstore.File, error)
}

// openContext opens name in fsys, giving up when ctx ends if fsys can wait.
func openContext(ctx context.Context, fsys fs.FS, name string) (fs.File, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if co, ok := fsys.(contextOpener); ok {
		f, err := co.OpenContext(ctx, name)
		if err != nil {
			return nil, err // not a nil *objstore.File in a non-nil fs.File
		}
		return f, nil
	}
	return fsys.Open(name)
}

// indexShard reads shard name's headers and small members.
func indexShard(ctx context.Context, fsys fs.FS, name string, o *WebDatasetOptions) (*wdsShard, error) {
	f, err := openContext(ctx, fsys, name)
	if err != nil {
		return nil, ioFailure(name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, ioFailure(name, err)
	}
	if err := files.Regular(fi); err != nil {
		return nil, fmt.Errorf("source: webdataset shard %s: %w", name, err)
	}
	total := fi.Size()
	if total == 0 {
		return nil, fmt.Errorf("source: webdataset shard %s: empty file, not a tar file", name)
	}
	pr := &posReader{r: f}
	var r io.Reader = pr
	if s, ok := f.(io.Seeker); ok {
		sr := &seekPosReader{posReader: posReader{r: f}, s: s}
		pr, r = &sr.posReader, sr
	}
	tr := tar.NewReader(r)
	sh := &wdsShard{mod: fi.ModTime(), bytes: total, bad: map[int]string{}, names: map[string]bool{}}
	seen := map[string]bool{}
	var cur *wdsSample
	flush := func() {
		if cur == nil {
			return
		}
		sh.add(cur, o)
		cur = nil
	}
	members, last := 0, ""
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if pr.err != nil && errors.Is(err, pr.err) {
				// The file failed to read, not the tar format: keeping the samples
				// before it would drop the rest of the shard for good.
				return nil, ioFailure(name, err)
			}
			if members == 0 {
				return nil, fmt.Errorf("source: webdataset shard %s: not a readable tar file: %w", name, err)
			}
			why := fmt.Sprintf("shard damaged after member %s: %v", last, err)
			o.Logf("source: webdataset shard %s: damaged after member %s (%v); keeping the %d samples before it", name, last, err, len(sh.keys))
			if cur != nil {
				cur.bad = why
			}
			break
		}
		members++
		last = h.Name
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if !strings.Contains(h.Name, "/") && strings.HasPrefix(h.Name, "__") && strings.HasSuffix(h.Name, "__") {
			continue
		}
		key, ext, ok := basePlusExt(h.Name)
		if !ok {
			continue
		}
		ext = strings.ToLower(ext)
		if cur == nil || key != cur.key {
			flush()
			cur = &wdsSample{key: key, img: -1}
			if seen[key] {
				cur.bad = "its key repeats an earlier sample of the shard"
			}
			seen[key] = true
		}
		off, size := pr.pos, h.Size
		if size < 0 || size > total-off { // not off+size > total: a hostile size overflows it
			cur.bad = fmt.Sprintf("member %s runs past the end of the shard (%d bytes)", h.Name, total)
			continue
		}
		if sparse(h) {
			// Its data in the shard is a sparse map and fragments, not the file: the
			// offset and size would read the wrong bytes.
			cur.setBad("member %s is a sparse file, which webdataset shards do not use", h.Name)
			continue
		}
		if slices.Contains(cur.exts, ext) {
			cur.setBad("member %s repeats extension %q in the sample", h.Name, ext)
			continue
		}
		cur.exts = append(cur.exts, ext)
		if i := slices.Index(wdsImageExts, ext); i >= 0 && cur.img < 0 {
			cur.img, cur.off, cur.size = i, off, size
			continue
		}
		label := ext == "cls" || ext == "json"
		if !label && !o.keeps(ext) {
			continue
		}
		if size > int64(o.MaxMetadataBytes) {
			if label {
				cur.setBad("label member %s has %d bytes, more than MaxMetadataBytes %d", h.Name, size, o.MaxMetadataBytes)
			} else {
				sh.dropped++
			}
			continue
		}
		data := make([]byte, size)
		if _, err := io.ReadFull(tr, data); err != nil {
			cur.setBad("member %s: %v", h.Name, err)
			continue
		}
		if o.keeps(ext) {
			cur.meta = append(cur.meta, wdsMeta{ext, data})
		}
		switch ext {
		case "cls":
			cur.hasCls = true
			n, err := strconv.Atoi(string(bytes.TrimSpace(data)))
			if err != nil || n < 0 || n > maxLabel {
				cur.setBad("member %s: label %q is not an integer in [0, %d]", h.Name, abbrevBytes(data), maxLabel)
				continue
			}
			cur.cls = []wdsLabel{{n: n}}
		case "json":
			ls, multi, err := jsonLabel(data)
			if err != nil {
				cur.setBad("member %s: %v", h.Name, err)
				continue
			}
			cur.json, cur.multi = ls, multi
		}
		for _, l := range cur.labels() {
			if l.name != "" {
				sh.names[l.name] = true
				sh.where[0] = h.Name
			} else {
				sh.hasInt = true
				sh.where[1] = h.Name
			}
		}
	}
	flush()
	if pr.err != nil {
		// A member's data failed to read (its sample is marked bad): the file, not
		// the shard, is at fault.
		return nil, ioFailure(name, pr.err)
	}
	if sh.dropped > 0 {
		o.Logf("source: webdataset shard %s: %d members over MaxMetadataBytes %d left out of the metadata", name, sh.dropped, o.MaxMetadataBytes)
	}
	return sh, nil
}

// sparse says whether h is a GNU sparse file in PAX form (a 'S' header is not
// TypeReg and is skipped).
func sparse(h *tar.Header) bool {
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

func (c *wdsSample) setBad(format string, args ...any) {
	if c.bad == "" {
		c.bad = fmt.Sprintf(format, args...)
	}
}

// labels are the sample's labels: .cls's, else .json's; nil when it has neither.
func (c *wdsSample) labels() []wdsLabel {
	if c.hasCls {
		return c.cls
	}
	return c.json
}

// add appends the finished sample c.
func (sh *wdsShard) add(c *wdsSample, o *WebDatasetOptions) {
	i := len(sh.keys)
	if c.img < 0 && c.bad == "" {
		have := slices.Sorted(slices.Values(c.exts))
		c.bad = fmt.Sprintf("no image member (.jpg, .jpeg, .png or .webp) among its members (.%s)", strings.Join(have, " ."))
	}
	if c.bad != "" {
		sh.bad[i] = c.bad
	}
	sh.keys = append(sh.keys, c.key)
	sh.off = append(sh.off, c.off)
	sh.size = append(sh.size, c.size)
	sh.imgExt = append(sh.imgExt, uint8(max(c.img, 0)))
	var ls []wdsLabel
	if c.hasCls || c.json != nil || c.multi {
		ls = c.labels()
		if ls == nil {
			ls = []wdsLabel{} // an empty list: labelled, with no label
		}
	}
	sh.labels = append(sh.labels, ls)
	sh.meta = append(sh.meta, c.meta)
}

// jsonLabel reads "label" of a .json member: an integer, a class name or a list of
// either (multi is then true). No "label", or null, is no label.
func jsonLabel(data []byte) (ls []wdsLabel, multi bool, err error) {
	var doc struct {
		Label json.RawMessage `json:"label"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, false, fmt.Errorf("not a JSON object: %v", err)
	}
	raw := bytes.TrimSpace(doc.Label)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, false, nil
	}
	one := func(r json.RawMessage) (wdsLabel, error) {
		var s string
		if json.Unmarshal(r, &s) == nil {
			if s == "" {
				return wdsLabel{}, errors.New(`empty class name in "label"`)
			}
			return wdsLabel{name: s}, nil
		}
		var n int
		if err := json.Unmarshal(r, &n); err != nil || n < 0 || n > maxLabel {
			return wdsLabel{}, fmt.Errorf(`"label" %s is neither an integer in [0, %d] nor a class name`, abbrevBytes(r), maxLabel)
		}
		return wdsLabel{n: n}, nil
	}
	if raw[0] == '[' {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, false, fmt.Errorf(`"label": %v`, err)
		}
		ls = []wdsLabel{}
		for _, r := range list {
			l, err := one(r)
			if err != nil {
				return nil, false, err
			}
			ls = append(ls, l)
		}
		return ls, true, nil
	}
	l, err := one(raw)
	if err != nil {
		return nil, false, err
	}
	return []wdsLabel{l}, false, nil
}

// abbrevBytes quotes at most 40 bytes of b.
func abbrevBytes(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

// basePlusExt splits a member name as WebDataset's base_plus_ext: the key is the name up
// to the first dot of its base name, the extension what follows; ok is false without one.
func basePlusExt(name string) (key, ext string, ok bool) {
	dir, base := "", name
	if k := strings.LastIndexByte(name, '/'); k >= 0 {
		dir, base = name[:k+1], name[k+1:]
	}
	k := strings.IndexByte(base, '.')
	if k <= 0 {
		return "", "", false
	}
	return dir + base[:k], base[k+1:], true
}

// transientError is an I/O error reading a shard (as opposed to what the shard
// holds), worth trying again.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// ioFailure wraps err, met opening or reading shard name, as transient unless it says
// the shard is missing or unreadable for good.
func ioFailure(name string, err error) error {
	err = fmt.Errorf("source: webdataset shard %s: %w", name, err)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return err
	}
	return &transientError{err}
}
