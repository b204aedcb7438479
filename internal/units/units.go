// Package units formats quantities for people: sizes in messages, logs and reports.
package units

import (
	"strconv"
	"strings"
)

// Bytes formats n in IEC units with at most one decimal: "1023 B", "1.5 KiB", "147 KiB",
// "64 MiB". A negative n keeps its sign.
func Bytes(n int64) string {
	const unit = 1024
	if n < 0 {
		if n == -1<<63 {
			return "-8 EiB"
		}
		return "-" + Bytes(-n)
	}
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	s := strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64)
	if strings.HasPrefix(s, "1024") && exp < 5 { // 1023.96 KiB rounds to the next unit
		s, exp = "1", exp+1
	}
	return strings.TrimSuffix(s, ".0") + " " + "KMGTPE"[exp:exp+1] + "iB"
}
