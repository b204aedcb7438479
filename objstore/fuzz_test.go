package objstore

import (
	"strings"
	"testing"
)

// FuzzDatasetURL feeds arbitrary dataset URLs to the parser and the brace expander:
// neither may panic, and an expansion stays within MaxExpansion names and keeps the
// text outside the braces.
func FuzzDatasetURL(f *testing.F) {
	for _, s := range []string{
		"s3://bucket/train-{000000..001023}.tar", "https://h/x/{a,b}-{1..3}.tar", "/data/*.tar",
		"file:///abs", "s3://", "x-{3..1}", "{{}}", "{0..99999999999}", "a{1..2}b{c,d}e",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 256 {
			return
		}
		ParseURL(s)
		dir, pattern := splitPattern(s)
		if !strings.HasPrefix(s, dir) || dir+pattern != s {
			t.Fatalf("splitPattern(%q) = %q, %q", s, dir, pattern)
		}
		names, err := ExpandBraces(s)
		if err != nil {
			return
		}
		if len(names) == 0 || len(names) > MaxExpansion {
			t.Fatalf("ExpandBraces(%q): %d names", s, len(names))
		}
		if i := strings.IndexByte(s, '{'); i >= 0 && !strings.HasPrefix(names[0], s[:i]) {
			t.Fatalf("ExpandBraces(%q)[0] = %q lost the prefix", s, names[0])
		}
	})
}
