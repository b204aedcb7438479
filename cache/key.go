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
	h := sha256.New()
	var b [8]byte
	field := func(s []byte) {
		binary.LittleEndian.PutUint64(b[:], uint64(len(s)))
		h.Write(b[:])
		h.Write(s)
	}
	binary.LittleEndian.PutUint64(b[:], FormatVersion)
	h.Write(b[:])
	field([]byte(k.Spec))
	field([]byte(k.Path))
	binary.LittleEndian.PutUint64(b[:], uint64(k.Size))
	h.Write(b[:])
	binary.LittleEndian.PutUint64(b[:], uint64(k.ModTime))
	h.Write(b[:])
	field(k.Hash)
	var id ID
	copy(id[:], h.Sum(nil))
	return id
}
