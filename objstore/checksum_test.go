package objstore

import (
	"encoding/base64"
	"hash/crc64"
	"math/rand/v2"
	"testing"
)

// CRC-64/NVME: the catalogue's check value, and the standard library's table-driven
// CRC with the same polynomial for every length and split of the input.
func TestCRC64NVME(t *testing.T) {
	h := newSum("crc64nvme")
	h.Write([]byte("123456789"))
	if got := h.(*crc64nvme).crc; got != 0xae8b14860a799888 {
		t.Fatalf("check value %#x, want 0xae8b14860a799888", got)
	}
	tab := crc64.MakeTable(0x9a6c9329ac4bc9b5)
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 5000)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	for _, n := range []int{0, 1, 7, 8, 9, 63, 64, 65, 1000, 4999, 5000} {
		for _, cut := range []int{0, n / 3, n} {
			h := newSum("crc64nvme")
			h.Write(buf[:cut])
			h.Write(buf[cut:n])
			want := crc64.Update(0, tab, buf[:n])
			if got := h.(*crc64nvme).crc; got != want {
				t.Fatalf("%d bytes cut at %d: %#x, want %#x", n, cut, got, want)
			}
		}
	}
}

// Only full-object checksums of the right length are used, CRC32C first.
func TestParseWantSum(t *testing.T) {
	c32c := base64.StdEncoding.EncodeToString([]byte{1, 2, 3, 4})
	c64 := base64.StdEncoding.EncodeToString([]byte{1, 2, 3, 4, 5, 6, 7, 8})
	for _, c := range []struct {
		values map[string]string
		typ    string
		want   string
	}{
		{map[string]string{"crc32c": c32c, "crc64nvme": c64}, "FULL_OBJECT", "crc32c"},
		{map[string]string{"crc64nvme": c64}, "", "crc64nvme"},
		{map[string]string{"crc32": c32c}, "COMPOSITE", ""},
		{map[string]string{"crc32c": c32c + "-3"}, "", ""},
		{map[string]string{"crc32c": c64}, "", ""}, // wrong length
		{map[string]string{"crc32": "not base64!"}, "", ""},
		{nil, "", ""},
	} {
		if got := parseWantSum(c.values, c.typ); got.alg != c.want {
			t.Errorf("%v %q: %q, want %q", c.values, c.typ, got.alg, c.want)
		}
	}
}
