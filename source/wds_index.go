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
	f, fi, err := openShard(ctx, fsys, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	x := newShardIndexer(f, fi, name, o)
	if err := x.members(); err != nil {
		return nil, err
	}
	x.flush()
	if x.pr.err != nil {
		// A member's data failed to read (its sample is marked bad): the file, not
		// the shard, is at fault.
		return nil, ioFailure(name, x.pr.err)
	}
	if x.sh.dropped > 0 {
		o.Logf("source: webdataset shard %s: %d members over MaxMetadataBytes %d left out of the metadata", name, x.sh.dropped, o.MaxMetadataBytes)
	}
	return x.sh, nil
}

// openShard opens shard name, a regular file that is not empty.
func openShard(ctx context.Context, fsys fs.FS, name string) (fs.File, fs.FileInfo, error) {
	f, err := openContext(ctx, fsys, name)
	if err != nil {
		return nil, nil, ioFailure(name, err)
	}
	fi, err := statShard(f, name)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// statShard is the open shard f's FileInfo, when it is a regular file that is not empty.
func statShard(f fs.File, name string) (fs.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, ioFailure(name, err)
	}
	if err := files.Regular(fi); err != nil {
		return nil, fmt.Errorf("source: webdataset shard %s: %w", name, err)
	}
	if fi.Size() == 0 {
		return nil, fmt.Errorf("source: webdataset shard %s: empty file, not a tar file", name)
	}
	return fi, nil
}

// shardIndexer is the state of indexing one shard: the tar reader over it, and the
// samples found so far.
type shardIndexer struct {
	name  string
	o     *WebDatasetOptions
	total int64      // the shard's size
	pr    *posReader // the position in the shard, below tr
	tr    *tar.Reader
	sh    *wdsShard
	seen  map[string]bool // sample keys
	cur   *wdsSample      // the sample being collected
	count int             // members read
	last  string          // the last member's name
}

func newShardIndexer(f fs.File, fi fs.FileInfo, name string, o *WebDatasetOptions) *shardIndexer {
	x := &shardIndexer{name: name, o: o, total: fi.Size(), seen: map[string]bool{},
		sh: &wdsShard{mod: fi.ModTime(), bytes: fi.Size(), bad: map[int]string{}, names: map[string]bool{}}}
	x.pr = &posReader{r: f}
	var r io.Reader = x.pr
	if s, ok := f.(io.Seeker); ok {
		sr := &seekPosReader{posReader: posReader{r: f}, s: s}
		x.pr, r = &sr.posReader, sr
	}
	x.tr = tar.NewReader(r)
	return x
}

// flush adds the sample being collected, if any.
func (x *shardIndexer) flush() {
	if x.cur != nil {
		x.sh.add(x.cur, x.o)
		x.cur = nil
	}
}

// members reads every member's header, and the members it keeps, until the end of the
// shard or a damaged header (which keeps the samples before it).
func (x *shardIndexer) members() error {
	for {
		h, err := x.tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return x.damaged(err)
		}
		x.count++
		x.last = h.Name
		x.member(h)
	}
}

// damaged handles err, met reading the header after member x.last: an error when the
// file failed or the shard is not a tar file; otherwise the shard is cut short there.
func (x *shardIndexer) damaged(err error) error {
	if x.pr.err != nil && errors.Is(err, x.pr.err) {
		// The file failed to read, not the tar format: keeping the samples
		// before it would drop the rest of the shard for good.
		return ioFailure(x.name, err)
	}
	if x.count == 0 {
		return fmt.Errorf("source: webdataset shard %s: not a readable tar file: %w", x.name, err)
	}
	why := fmt.Sprintf("shard damaged after member %s: %v", x.last, err)
	x.o.Logf("source: webdataset shard %s: damaged after member %s (%v); keeping the %d samples before it", x.name, x.last, err, len(x.sh.keys))
	if x.cur != nil {
		x.cur.bad = why
	}
	return nil
}

// member adds the member h to its sample, starting a new sample when its key changes.
func (x *shardIndexer) member(h *tar.Header) {
	if h.Typeflag != tar.TypeReg {
		return
	}
	if !strings.Contains(h.Name, "/") && strings.HasPrefix(h.Name, "__") && strings.HasSuffix(h.Name, "__") {
		return
	}
	key, ext, ok := basePlusExt(h.Name)
	if !ok {
		return
	}
	ext = strings.ToLower(ext)
	if x.cur == nil || key != x.cur.key {
		x.flush()
		x.cur = &wdsSample{key: key, img: -1}
		if x.seen[key] {
			x.cur.bad = "its key repeats an earlier sample of the shard"
		}
		x.seen[key] = true
	}
	cur := x.cur
	off, size := x.pr.pos, h.Size
	if size < 0 || size > x.total-off { // not off+size > total: a hostile size overflows it
		cur.bad = fmt.Sprintf("member %s runs past the end of the shard (%d bytes)", h.Name, x.total)
		return
	}
	if sparse(h) {
		// Its data in the shard is a sparse map and fragments, not the file: the
		// offset and size would read the wrong bytes.
		cur.setBad("member %s is a sparse file, which webdataset shards do not use", h.Name)
		return
	}
	if slices.Contains(cur.exts, ext) {
		cur.setBad("member %s repeats extension %q in the sample", h.Name, ext)
		return
	}
	cur.exts = append(cur.exts, ext)
	if i := slices.Index(wdsImageExts, ext); i >= 0 && cur.img < 0 {
		cur.img, cur.off, cur.size = i, off, size
		return
	}
	x.small(h, ext)
}

// small reads member h, other than the sample's image, when it is a label or kept as
// metadata, and parses a label.
func (x *shardIndexer) small(h *tar.Header, ext string) {
	cur, o := x.cur, x.o
	label := ext == "cls" || ext == "json"
	if !label && !o.keeps(ext) {
		return
	}
	if h.Size > int64(o.MaxMetadataBytes) {
		if label {
			cur.setBad("label member %s has %d bytes, more than MaxMetadataBytes %d", h.Name, h.Size, o.MaxMetadataBytes)
		} else {
			x.sh.dropped++
		}
		return
	}
	data := make([]byte, h.Size)
	if _, err := io.ReadFull(x.tr, data); err != nil {
		cur.setBad("member %s: %v", h.Name, err)
		return
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
			return
		}
		cur.cls = []wdsLabel{{n: n}}
	case "json":
		ls, multi, err := jsonLabel(data)
		if err != nil {
			cur.setBad("member %s: %v", h.Name, err)
			return
		}
		cur.json, cur.multi = ls, multi
	}
	for _, l := range cur.labels() {
		if l.name != "" {
			x.sh.names[l.name] = true
			x.sh.where[0] = h.Name
		} else {
			x.sh.hasInt = true
			x.sh.where[1] = h.Name
		}
	}
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
