package source

import (
	"errors"
	"slices"
)

// labelTable holds every label of each sample of a multi-label source, compactly: sample
// i's labels are vals[ends[i-1]:ends[i]]. Its zero value holds none, as a single-label
// source's (whose index holds each sample's one label) does. Manifests and WebDataset
// shards store their labels in one.
type labelTable struct {
	ends []uint32 // ends[i] is the end of sample i's labels in vals
	vals []int32
}

// push adds label l to the sample being added.
func (t *labelTable) push(l int32) { t.vals = append(t.vals, l) }

// end ends the labels of the sample being added.
func (t *labelTable) end() error {
	if len(t.vals) > 1<<32-1 {
		return errors.New("more than 2^32 labels")
	}
	t.ends = append(t.ends, uint32(len(t.vals)))
	return nil
}

// of is sample i's labels, in the table.
func (t *labelTable) of(i int) []int32 {
	start := uint32(0)
	if i > 0 {
		start = t.ends[i-1]
	}
	return t.vals[start:t.ends[i]]
}

// appendTo appends sample i's labels to dst.
func (t *labelTable) appendTo(dst []int, i int) []int {
	for _, l := range t.of(i) {
		dst = append(dst, int(l))
	}
	return dst
}

// clip releases the slack capacity left by appending.
func (t *labelTable) clip() { t.ends, t.vals = slices.Clip(t.ends), slices.Clip(t.vals) }

// metaTable holds each sample's metadata compactly: its values in one arena, each under
// the id of its key. Sample i's fields are fields[ends[i-1]:ends[i]]; the samples before
// the first with a field end at 0. Manifests and WebDataset shards store their metadata
// in one.
type metaTable struct {
	keys   []string       // metadata keys, in order of first appearance
	keyID  map[string]int // key -> its index in keys
	ends   []uint32       // ends[i] is the end of sample i's fields; nil: no keys
	fields []metaField
	arena  []byte
}

// metaField is one sample's value under key: arena from the previous field's end to end.
type metaField struct{ key, end uint32 }

// key returns the id of metadata key k, adding it.
func (t *metaTable) key(k string) int {
	id, ok := t.keyID[k]
	if !ok {
		if t.keyID == nil {
			t.keyID = map[string]int{}
		}
		id = len(t.keys)
		t.keyID[k] = id
		t.keys = append(t.keys, k)
	}
	return id
}

// addField adds value v under key id to the sample being added.
func addField[T string | []byte](t *metaTable, id int, v T) {
	t.arena = append(t.arena, v...)
	t.fields = append(t.fields, metaField{key: uint32(id), end: uint32(len(t.arena))})
}

// endSample ends the fields of sample i, the one being added. Samples before it that
// ended none (before the table had keys) have none.
func (t *metaTable) endSample(i int) error {
	if len(t.keys) == 0 {
		return nil
	}
	if len(t.arena) > 1<<32-1 || len(t.fields) > 1<<32-1 {
		return errors.New("more than 4 GiB of metadata")
	}
	t.pad(i)
	t.ends = append(t.ends, uint32(len(t.fields)))
	return nil
}

// pad ends samples up to n with no more fields.
func (t *metaTable) pad(n int) {
	last := uint32(0)
	if len(t.ends) > 0 {
		last = t.ends[len(t.ends)-1]
	}
	for len(t.ends) < n {
		t.ends = append(t.ends, last)
	}
}

// finish ends the table at n samples: those after the last with a field have none.
func (t *metaTable) finish(n int) {
	if len(t.keys) > 0 {
		t.pad(n)
	}
}

// get returns sample i's value under key.
func (t *metaTable) get(i int, key string) ([]byte, bool) {
	id, ok := t.keyID[key]
	if !ok || t.ends == nil {
		return nil, false
	}
	start := uint32(0)
	if i > 0 {
		start = t.ends[i-1]
	}
	for f := start; f < t.ends[i]; f++ {
		if t.fields[f].key == uint32(id) {
			var from uint32
			if f > 0 {
				from = t.fields[f-1].end
			}
			return t.arena[from:t.fields[f].end:t.fields[f].end], true
		}
	}
	return nil, false
}

// clip releases the slack capacity left by appending.
func (t *metaTable) clip() {
	t.ends, t.fields, t.arena = slices.Clip(t.ends), slices.Clip(t.fields), slices.Clip(t.arena)
}
