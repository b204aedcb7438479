package objstore

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"net/http"
	"strings"
)

// A download is checked against the strongest check the response offers that costs
// little CPU: a full-object CRC checksum (x-amz-checksum-crc32c, -crc32 or -crc64nvme,
// which AWS S3 and S3-compatible stores such as versitygw record for objects uploaded
// since 2025 by default, and for any upload that asked for one), else the ETag when it is
// the body's MD5. CRC32C and CRC32 run at tens of GB/s with the CPU's instructions, a
// CRC64/NVME at about 2 GB/s with tables, MD5 at under 1 GB/s: on a training node whose
// cores decode images, that difference is throughput. A composite checksum (a multipart
// upload's checksum of part checksums, "…-N") cannot be checked from the body alone and
// is not used.

// A wantSum is a checksum a response says the whole object has.
type wantSum struct {
	alg  string // "crc32c", "crc32" or "crc64nvme"; "" for none
	want []byte // big-endian, as S3 sends it (base64 in the header)
}

// checksumAlgs are the checksum headers used, in order of preference.
var checksumAlgs = []string{"crc32c", "crc32", "crc64nvme"}

// parseWantSum picks the checksum to check from a response's values (by algorithm) and
// checksum type: only full-object checksums, decoded to their lengths.
func parseWantSum(values map[string]string, typ string) wantSum {
	if typ != "" && !strings.EqualFold(typ, "FULL_OBJECT") {
		return wantSum{}
	}
	for _, alg := range checksumAlgs {
		v := values[alg]
		if v == "" || strings.Contains(v, "-") {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(b) != newSum(alg).Size() {
			continue
		}
		return wantSum{alg: alg, want: b}
	}
	return wantSum{}
}

// headerWantSum reads the checksum headers of an HTTP response.
func headerWantSum(h http.Header) wantSum {
	values := map[string]string{}
	for _, alg := range checksumAlgs {
		if v := h.Get("X-Amz-Checksum-" + alg); v != "" {
			values[alg] = v
		}
	}
	if len(values) == 0 {
		return wantSum{}
	}
	return parseWantSum(values, h.Get("X-Amz-Checksum-Type"))
}

// newSum returns the hash of an algorithm: a checksum algorithm, or "md5".
func newSum(alg string) hash.Hash {
	switch alg {
	case "crc32c":
		return crc32.New(castagnoli)
	case "crc32":
		return crc32.NewIEEE()
	case "crc64nvme":
		return &crc64nvme{}
	default:
		return md5.New()
	}
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// showSum formats a digest as its algorithm's usual text: base64 for checksums as S3
// sends them, hex for an MD5 as in an ETag.
func showSum(alg string, b []byte) string {
	if alg == "md5" {
		return hex.EncodeToString(b)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// crc64nvme is the CRC-64/NVME checksum (reflected polynomial 0x9a6c9329ac4bc9b5, the
// check value of "123456789" is 0xae8b14860a799888), computed by slicing-by-8 with
// tables made once: the standard library's hash/crc64 makes its slicing tables anew on
// every large write for a polynomial other than ISO and ECMA.
type crc64nvme struct{ crc uint64 }

var nvmeTables = func() *[8][256]uint64 {
	t := new([8][256]uint64)
	t[0] = *crc64.MakeTable(0x9a6c9329ac4bc9b5)
	for i := range 256 {
		c := t[0][i]
		for j := 1; j < 8; j++ {
			c = t[0][c&0xff] ^ c>>8
			t[j][i] = c
		}
	}
	return t
}()

func (h *crc64nvme) Write(p []byte) (int, error) {
	t := nvmeTables
	crc := ^h.crc
	n := len(p)
	for len(p) >= 8 {
		crc ^= binary.LittleEndian.Uint64(p)
		crc = t[7][crc&0xff] ^ t[6][crc>>8&0xff] ^ t[5][crc>>16&0xff] ^ t[4][crc>>24&0xff] ^
			t[3][crc>>32&0xff] ^ t[2][crc>>40&0xff] ^ t[1][crc>>48&0xff] ^ t[0][crc>>56]
		p = p[8:]
	}
	for _, v := range p {
		crc = t[0][byte(crc)^v] ^ crc>>8
	}
	h.crc = ^crc
	return n, nil
}

func (h *crc64nvme) Sum(b []byte) []byte { return binary.BigEndian.AppendUint64(b, h.crc) }
func (h *crc64nvme) Reset()              { h.crc = 0 }
func (h *crc64nvme) Size() int           { return 8 }
func (h *crc64nvme) BlockSize() int      { return 8 }
