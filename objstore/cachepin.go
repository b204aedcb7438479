package objstore

import (
	"fmt"
	"strings"
)

// refusal is how many fetches of an object in a row checkPin refused, and why the last
// was.
type refusal struct {
	n   int
	err error
}

// maxRefusals is how many fetches of an object in a row must differ from its pin before
// the cache stops fetching it: a byte flipped on the way (from a store that sends no
// checksum) is fetched again once, while a shard replaced in the store is not fetched
// whole again for every sample read from it.
const maxRefusals = 2

// An Identity is what tells one version of an object from another: its size, ETag and
// the CRC-32C of its bytes. A shard index records it when it is made, and a [ShardCache]
// checks every fetch against it. Empty fields are unknown and not checked.
type Identity struct {
	Size   int64  // bytes; 0: unknown
	ETag   string // as the store sends it, quotes removed; "": unknown
	CRC32C string // CRC-32C (Castagnoli) of the bytes, 8 hex digits; "": unknown
}

// checkPin pins an object's Identity on its first fetch and refuses a fetch whose
// known fields differ from the pin's; fields the pin lacks (one Expect left empty) are
// filled from the first fetch that has them. Locked.
func (c *ShardCache) checkPin(name string, got Identity) error {
	p, ok := c.pins[name]
	if !ok {
		c.pins[name] = got
		return nil
	}
	if (p.Size == 0 || p.Size == got.Size) && (p.ETag == "" || got.ETag == "" || p.ETag == got.ETag) &&
		(p.CRC32C == "" || got.CRC32C == "" || strings.EqualFold(p.CRC32C, got.CRC32C)) {
		if p.Size == 0 {
			p.Size = got.Size
		}
		if p.ETag == "" {
			p.ETag = got.ETag
		}
		if p.CRC32C == "" {
			p.CRC32C = got.CRC32C
		}
		c.pins[name] = p
		delete(c.refused, name)
		return nil
	}
	err := fmt.Errorf("objstore: %s: %w: indexed as %s; fetched as %s (an index of it holds the old offsets: index it again)",
		c.b.URL(name), ErrChanged, p, got)
	r := c.refused[name]
	r.n++
	r.err = err
	c.refused[name] = r
	return err
}

// String prints an Identity's known fields.
func (id Identity) String() string {
	s := fmt.Sprintf("%d bytes", id.Size)
	if id.ETag != "" {
		s += fmt.Sprintf(", ETag %q", id.ETag)
	}
	if id.CRC32C != "" {
		s += ", CRC-32C " + id.CRC32C
	}
	return s
}

// Expect tells the cache what an object should be, from an index made before (a shard
// index's size, ETag and checksum): its first fetch is checked against it as a later
// fetch is against the first, and refused by name with [ErrChanged] when they differ.
// An object already fetched keeps its pin.
func (c *ShardCache) Expect(name string, id Identity) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pins[name]; !ok {
		c.pins[name] = id
	}
}

// Identity returns an object's Identity as first fetched (or expected), and whether it
// has one: an index made from the cache's files records it.
func (c *ShardCache) Identity(name string) (Identity, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.pins[name]
	return id, ok
}
