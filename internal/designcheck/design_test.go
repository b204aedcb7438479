// Package designcheck holds the tests that keep docs/DESIGN.md true to the code: its
// package map names every package and every file of the engine and the sources, and no
// package imports one in a layer above its own.
package designcheck

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/conveyor-ml/conveyor/"

// design reads DESIGN.md's package map (the first fenced block after "## Packages") and
// its layer list (the line after "Layers, lowest first:" up to the next blank line).
func design(t *testing.T) (mapLines []string, layers [][]string) {
	t.Helper()
	f, err := os.Open("../../docs/DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	state := 0
	var layerText strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case state == 0 && line == "## Packages":
			state = 1
		case state == 1 && strings.HasPrefix(line, "```"):
			state = 2
		case state == 2 && strings.HasPrefix(line, "```"):
			state = 3
		case state == 2:
			mapLines = append(mapLines, line)
		case state == 3 && strings.HasPrefix(line, "Layers, lowest first:"):
			state = 4
			layerText.WriteString(strings.TrimPrefix(line, "Layers, lowest first:"))
		case state == 4 && strings.TrimSpace(line) == "":
			state = 5
		case state == 4:
			layerText.WriteString(" " + line)
		}
	}
	if len(mapLines) == 0 {
		t.Fatal("DESIGN.md: no package map (a fenced block after ## Packages)")
	}
	// "1. `a`, `b`; 2. `c` ..." : layers separated by ';', packages in backquotes.
	for _, part := range strings.Split(layerText.String(), ";") {
		var layer []string
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(part, -1) {
			layer = append(layer, m[1])
		}
		if len(layer) > 0 {
			layers = append(layers, layer)
		}
	}
	if len(layers) < 3 {
		t.Fatalf("DESIGN.md: no layer list (a line starting \"Layers, lowest first:\"), got %v", layers)
	}
	return mapLines, layers
}

type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "-tags", "cuda", "../../...")
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	var ps []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		p.ImportPath = strings.TrimPrefix(p.ImportPath, module)
		ps = append(ps, p)
	}
	return ps
}

// TestPackageMap: every package is in the map, and every file of pipeline and source
// is named there (by name or by a glob such as wds*.go).
func TestPackageMap(t *testing.T) {
	mapLines, _ := design(t)
	text := strings.Join(mapLines, "\n")
	// The map is indented: a package's path at the start of a line (a subpackage below
	// its parent, indented by two), files below it indented further.
	entries := map[string]bool{}
	var parent string
	for _, l := range mapLines {
		f := strings.Fields(l)
		if len(f) == 0 || !strings.HasSuffix(f[0], "/") {
			continue
		}
		name := strings.TrimSuffix(f[0], "/")
		if !strings.HasPrefix(l, " ") {
			parent = name
			entries[name] = true
		} else {
			entries[parent+"/"+name] = true
		}
	}
	for _, p := range listPackages(t) {
		if strings.HasPrefix(p.ImportPath, "internal/designcheck") {
			continue
		}
		top := strings.SplitN(p.ImportPath, "/", 2)[0]
		if !entries[p.ImportPath] && !entries[top] {
			t.Errorf("package %s is not in DESIGN.md's package map", p.ImportPath)
		}
		if p.ImportPath != "pipeline" && p.ImportPath != "source" {
			continue
		}
		var patterns []string
		for _, m := range regexp.MustCompile(`[\w*]+\.go`).FindAllString(text, -1) {
			patterns = append(patterns, m)
		}
		for _, file := range p.GoFiles {
			if !slices.ContainsFunc(patterns, func(pat string) bool { ok, _ := path.Match(pat, file); return ok }) {
				t.Errorf("%s: DESIGN.md's package map does not name it", filepath.Join(p.ImportPath, file))
			}
		}
	}
}

// TestLayers: a package imports only packages of its own layer or below.
func TestLayers(t *testing.T) {
	_, layers := design(t)
	layerOf := func(p string) int {
		best, at := -1, -1
		for i, layer := range layers {
			for _, l := range layer {
				l = strings.TrimSuffix(l, "/...")
				if (p == l || strings.HasPrefix(p, l+"/")) && len(l) > best {
					best, at = len(l), i
				}
			}
		}
		return at
	}
	for _, p := range listPackages(t) {
		from := layerOf(p.ImportPath)
		if from < 0 {
			if !strings.HasPrefix(p.ImportPath, "internal/designcheck") {
				t.Errorf("package %s is in no layer of DESIGN.md", p.ImportPath)
			}
			continue
		}
		for _, im := range p.Imports {
			if !strings.HasPrefix(im, module) {
				continue
			}
			im = strings.TrimPrefix(im, module)
			if to := layerOf(im); to > from {
				t.Errorf("%s (layer %d) imports %s (layer %d): DESIGN.md's layers say it may not", p.ImportPath, from+1, im, to+1)
			}
		}
	}
}
