package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// FormatVersion is part of every key: records written by another format version never
// match, and shards and datasets of another version are refused. Version 2 stores s2
// payloads as bands of rows (see encodeBands); version 1 stored them whole.
const FormatVersion = 2

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// ErrCorrupt reports a record whose checksum or framing does not match; callers treat
// it as a miss.
var ErrCorrupt = errors.New("cache: corrupt record")

const (
	shardMagic  = "CONVEYOR-SHARD\x00\x00" // 16 bytes
	recordMagic = 0x52565943               // "CYVR" little-endian
	recordFixed = 64                       // fixed part of a record header
	idxFixed    = 12                       // offset u64 + crc u32 before the copied header
	maxPath     = 1<<16 - 1
	maxSpec     = 1 << 16
)

// versionError says that what (a shard, a dataset) has format version v, which this
// conveyor does not read, and what to do about it.
func versionError(what string, v int) error {
	who := "an older"
	if v > FormatVersion {
		who = "a newer"
	}
	return fmt.Errorf("%s format version %d, written by %s conveyor: this one reads version %d only; convert the dataset again (or delete the cache directory) with this version", what, v, who, FormatVersion)
}

// shard header:
//
//	[16]magic u32 version u32 codec u32 specLen spec u32 crc(everything before it)
func encodeShardHeader(codec Codec, spec string) []byte {
	b := make([]byte, 0, 32+len(spec))
	b = append(b, shardMagic...)
	b = binary.LittleEndian.AppendUint32(b, FormatVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(codec.id()))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(spec)))
	b = append(b, spec...)
	return binary.LittleEndian.AppendUint32(b, checksum(b))
}

// parseShardHeader reads a shard header from the start of b. need > 0 asks for more bytes.
func parseShardHeader(b []byte) (codec Codec, spec string, n, need int, err error) {
	if len(b) < 32 {
		return "", "", 0, 32, nil
	}
	if string(b[:16]) != shardMagic {
		return "", "", 0, 0, errors.New("not a cache shard")
	}
	if v := binary.LittleEndian.Uint32(b[16:]); v != FormatVersion {
		return "", "", 0, 0, versionError("shard", int(v))
	}
	specLen := int(binary.LittleEndian.Uint32(b[24:]))
	if specLen > maxSpec {
		return "", "", 0, 0, errors.New("shard header: spec too long")
	}
	n = 28 + specLen + 4
	if len(b) < n {
		return "", "", 0, n, nil
	}
	if checksum(b[:n-4]) != binary.LittleEndian.Uint32(b[n-4:]) {
		return "", "", 0, 0, errors.New("shard header checksum mismatch")
	}
	codec, err = codecByID(binary.LittleEndian.Uint32(b[20:]))
	if err != nil {
		return "", "", 0, 0, err
	}
	return codec, string(b[28 : 28+specLen]), n, 0, nil
}

// header is a record's header. On disk (little-endian):
//
//	0 magic u32 · 4 crc u32 of bytes 8..64+pathLen · 8 id [16] · 24 label i32
//	28 width u32 · 32 height u32 · 36 source size i64 · 44 source mtime (ns) i64
//	52 payload length u32 · 56 payload crc u32 · 60 path length u16 · 62 reserved u16
//	64 path · payload
type header struct {
	id            ID
	label         int32
	width, height uint32
	srcSize       int64
	srcMtime      int64
	payloadLen    uint32
	payloadCRC    uint32
	path          string
}

func (h *header) size() int      { return recordFixed + len(h.path) }
func (h *header) recordLen() int { return h.size() + int(h.payloadLen) }

func (h *header) put(b []byte) {
	le := binary.LittleEndian
	le.PutUint32(b[0:], recordMagic)
	copy(b[8:24], h.id[:])
	le.PutUint32(b[24:], uint32(h.label))
	le.PutUint32(b[28:], h.width)
	le.PutUint32(b[32:], h.height)
	le.PutUint64(b[36:], uint64(h.srcSize))
	le.PutUint64(b[44:], uint64(h.srcMtime))
	le.PutUint32(b[52:], h.payloadLen)
	le.PutUint32(b[56:], h.payloadCRC)
	le.PutUint16(b[60:], uint16(len(h.path)))
	le.PutUint16(b[62:], 0)
	copy(b[recordFixed:], h.path)
	le.PutUint32(b[4:], checksum(b[8:recordFixed+len(h.path)]))
}

// parseHeader decodes the header at the start of b. need > 0 asks for that many bytes.
func parseHeader(b []byte) (h header, need int, err error) {
	h, n, need, err := parseHeaderNoPath(b)
	if err == nil && need == 0 {
		h.path = string(b[recordFixed:n])
	}
	return h, need, err
}

// parseHeaderNoPath is parseHeader without copying the path, which reads of a record
// do not need, so that they allocate nothing; n is the header's size.
func parseHeaderNoPath(b []byte) (h header, n, need int, err error) {
	le := binary.LittleEndian
	if len(b) < recordFixed {
		return h, 0, recordFixed, nil
	}
	if le.Uint32(b) != recordMagic {
		return h, 0, 0, fmt.Errorf("%w: bad record magic", ErrCorrupt)
	}
	n = recordFixed + int(le.Uint16(b[60:]))
	if len(b) < n {
		return h, 0, n, nil
	}
	if checksum(b[8:n]) != le.Uint32(b[4:]) {
		return h, 0, 0, fmt.Errorf("%w: header checksum mismatch", ErrCorrupt)
	}
	copy(h.id[:], b[8:24])
	h.label = int32(le.Uint32(b[24:]))
	h.width = le.Uint32(b[28:])
	h.height = le.Uint32(b[32:])
	h.srcSize = int64(le.Uint64(b[36:]))
	h.srcMtime = int64(le.Uint64(b[44:]))
	h.payloadLen = le.Uint32(b[52:])
	h.payloadCRC = le.Uint32(b[56:])
	return h, n, 0, nil
}

// An index entry is the record's offset and a copy of its header:
//
//	0 offset u64 · 8 crc u32 of the offset · 12 record header
func appendIndexEntry(dst []byte, off int64, hdr []byte) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(off))
	dst = binary.LittleEndian.AppendUint32(dst, checksum(dst[len(dst)-8:]))
	return append(dst, hdr...)
}

// parseIndexEntry decodes the entry at the start of b; n is its length, 0 when b holds
// no complete entry (the end of a torn index).
func parseIndexEntry(b []byte) (off int64, h header, n int, err error) {
	if len(b) < idxFixed {
		return 0, h, 0, nil
	}
	if checksum(b[:8]) != binary.LittleEndian.Uint32(b[8:]) {
		return 0, h, 0, fmt.Errorf("%w: index entry checksum mismatch", ErrCorrupt)
	}
	h, need, err := parseHeader(b[idxFixed:])
	if err != nil || need > 0 {
		return 0, h, 0, err
	}
	return int64(binary.LittleEndian.Uint64(b)), h, idxFixed + h.size(), nil
}
