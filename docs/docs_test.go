// Package docs holds the reference pages linked from README.md, and this test, which keeps
// them honest: every Go block in README.md and docs/*.md is quoted from a file that CI
// compiles (so an API change breaks the build, not silently the docs), every relative link
// resolves, and every page is reachable from README.md.
package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// pages are the Markdown files checked. DESIGN.md is written by hand and checked for
// links only.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../README.md"}, docs...)
}

// A block is a fenced code block and the marker line before it, if any.
type block struct {
	lang, marker, text string
	line               int
}

func blocks(md string) []block {
	var out []block
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(l, "```") {
			continue
		}
		b := block{lang: strings.TrimPrefix(l, "```"), line: i + 1}
		if i > 0 {
			b.marker = strings.TrimSpace(lines[i-1])
		}
		var body []string
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			body = append(body, lines[i])
		}
		b.text = strings.Join(body, "\n") + "\n"
		out = append(out, b)
	}
	return out
}

var markerRE = regexp.MustCompile(`^<!-- (file|from): (\S+) -->$`)

// TestGoBlocks: every ```go block is preceded by <!-- file: PATH --> (the block is the
// whole of PATH) or <!-- from: PATH --> (the block's lines are consecutive lines of PATH,
// indented alike), PATH relative to the repository root and built by CI.
func TestGoBlocks(t *testing.T) {
	n := 0
	for _, page := range pages(t) {
		if filepath.Base(page) == "DESIGN.md" {
			continue
		}
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks(string(data)) {
			if b.lang != "go" {
				continue
			}
			n++
			where := fmt.Sprintf("%s:%d", page, b.line)
			m := markerRE.FindStringSubmatch(b.marker)
			if m == nil {
				t.Errorf("%s: a Go block without <!-- file: PATH --> or <!-- from: PATH --> before it; quote code from a file CI builds", where)
				continue
			}
			src, err := os.ReadFile(filepath.Join("..", m[2]))
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			switch m[1] {
			case "file":
				if string(src) != b.text {
					t.Errorf("%s: the block differs from %s; copy the file into the block", where, m[2])
				}
			case "from":
				if !excerpt(string(src), b.text) {
					t.Errorf("%s: the block's lines are not consecutive lines of %s; copy them again from there", where, m[2])
				}
			}
		}
	}
	if n == 0 {
		t.Error("no Go blocks found: README.md's Getting Started should have one")
	}
}

// excerpt reports whether every line of part is, in order, a line of src with the same
// number of tabs added in front of every non-empty line.
func excerpt(src, part string) bool {
	s := strings.Split(strings.TrimSuffix(src, "\n"), "\n")
	p := strings.Split(strings.TrimSuffix(part, "\n"), "\n")
	for i := 0; i+len(p) <= len(s); i++ {
		for tabs := 0; tabs <= 4; tabs++ {
			indent := strings.Repeat("\t", tabs)
			ok := true
			for j, l := range p {
				want := s[i+j]
				if l == "" {
					ok = strings.TrimSpace(want) == ""
				} else {
					ok = want == indent+l
				}
				if !ok {
					break
				}
			}
			if ok {
				return true
			}
		}
	}
	return false
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestLinks: every relative link of README.md and docs/*.md names a file or folder that
// exists, and an anchor names a heading of the page it points to.
func TestLinks(t *testing.T) {
	for _, page := range pages(t) {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := stripCode(string(data))
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %s: %v", page, target, err)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			md, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%s: link %s: %v", page, target, err)
				continue
			}
			if !slices.Contains(anchors(string(md)), anchor) {
				t.Errorf("%s: link %s: no heading with anchor #%s in %s", page, target, anchor, path)
			}
		}
	}
}

// TestReachable: every page in docs/ is linked from README.md.
func TestReachable(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range pages(t)[1:] {
		if !strings.Contains(string(readme), "](docs/"+page) {
			t.Errorf("docs/%s is not linked from README.md", page)
		}
	}
}

// stripCode drops fenced blocks and inline code, where brackets are not links.
func stripCode(md string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "```") {
			in = !in
			continue
		}
		if !in {
			b.WriteString(regexp.MustCompile("`[^`]*`").ReplaceAllString(l, "") + "\n")
		}
	}
	return b.String()
}

// anchors returns GitHub's anchors for md's headings: lower case, spaces to hyphens,
// punctuation other than hyphens and underscores dropped, repeats numbered.
func anchors(md string) []string {
	var out []string
	seen := map[string]int{}
	in := false
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "```") {
			in = !in
		}
		if in || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var s strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				s.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				s.WriteRune(r)
			}
		}
		a := s.String()
		if k := seen[a]; k > 0 {
			out = append(out, fmt.Sprintf("%s-%d", a, k))
		} else {
			out = append(out, a)
		}
		seen[a]++
	}
	return out
}
