package pipeline

import (
	"encoding/binary"
	"hash/crc32"
)

func crc32be(b []byte) []byte {
	return binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(b))
}
