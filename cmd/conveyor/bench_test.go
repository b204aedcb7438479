package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/internal/synth"
)

func TestBenchJSON(t *testing.T) {
	dir := t.TempDir()
	if _, err := synth.WriteTree(dir, &synth.TreeOptions{Classes: 2, PerClass: 9, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	for _, recipe := range []string{"train", "eval"} {
		var out bytes.Buffer
		if err := bench([]string{dir, "--recipe", recipe, "--size", "32", "--batch", "4", "--workers", "2", "--epochs", "2", "--json"}, &out); err != nil {
			t.Fatal(err)
		}
		var res map[string]any
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("%s: not one JSON object: %v\n%s", recipe, err, out.String())
		}
		for _, k := range []string{"images", "seconds", "images_per_s", "bad_samples"} {
			if _, ok := res[k]; !ok {
				t.Errorf("%s: no %q in %s", recipe, k, out.String())
			}
		}
		if res["images"].(float64) != 36 || res["bad_samples"].(float64) != 0 {
			t.Errorf("%s: %v images, %v bad; want 36 and 0", recipe, res["images"], res["bad_samples"])
		}
	}
}

func TestBenchText(t *testing.T) {
	dir := t.TempDir()
	if _, err := synth.WriteTree(dir, &synth.TreeOptions{Classes: 2, PerClass: 5, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := bench([]string{"--size", "16", "--batch", "4", dir}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "images_per_s=") || !strings.Contains(out.String(), "images=10 ") {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestBenchErrors(t *testing.T) {
	for _, args := range [][]string{
		{"/nonexistent/conveyor"},
		{t.TempDir()},
		{"--recipe", "nope"},
		{"--images", "3"},
		{"--dtype", "int7"},
		{"a", "b"},
	} {
		if err := bench(args, &bytes.Buffer{}); err == nil {
			t.Errorf("bench %q: no error", args)
		}
	}
}
