package units

import "testing"

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 150528: "147 KiB",
		64 << 20: "64 MiB", 3 << 30: "3 GiB", 1 << 62: "4 EiB", 17179869184: "16 GiB",
		1<<20 - 1: "1 MiB", -2048: "-2 KiB", -1 << 63: "-8 EiB", 1<<63 - 1: "8 EiB",
	} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
