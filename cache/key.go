package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// Key identifies a sample: the file it comes from and the spec that turned it into pixels.
type Key struct {
	// Spec describes every parameter that decides the stored pixels (decoder, resize
	// policy, orientation, ...), as decode.Options.String prints them with the backend
	// that actually ran.
	Spec string
	// Path names the file relative to its dataset's root.
	Path string
	// Size and ModTime (Unix nanoseconds) are the file's, as Stat reports them.
	Size    int64
	ModTime int64
	// Hash, when not nil, is a digest of the file's content, for file systems whose
	// modification times cannot be trusted.
	Hash []byte
}

// ID is the 128-bit digest of a Key and FormatVersion that records are found by.
type ID [16]byte

func (id ID) String() string { return hex.EncodeToString(id[:]) }

// ID digests k. Variable-length fields are length-prefixed so no two keys share a digest
// input.
func (k Key) ID() ID {
	// Built on the stack and hashed with Sum256, a typical key costs no allocation.
	var buf [512]byte
	le := binary.LittleEndian
	b := le.AppendUint64(buf[:0], FormatVersion)
	b = le.AppendUint64(b, uint64(len(k.Spec)))
	b = append(b, k.Spec...)
	b = le.AppendUint64(b, uint64(len(k.Path)))
	b = append(b, k.Path...)
	b = le.AppendUint64(b, uint64(k.Size))
	b = le.AppendUint64(b, uint64(k.ModTime))
	b = le.AppendUint64(b, uint64(len(k.Hash)))
	b = append(b, k.Hash...)
	sum := sha256.Sum256(b)
	return ID(sum[:16])
}
