package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// The headline is the steady state: the epochs after the first, over their own time;
// the first epoch, loader creation and the whole run are reported apart.
func TestBenchHeadlineSteadyState(t *testing.T) {
	dir := smallTree(t, 10)
	r := benchJSON(t, dir, "--workers", "2", "--epochs", "3")
	e := r.Epochs
	want := float64(e[1].Images+e[2].Images) / (e[1].Seconds + e[2].Seconds)
	if len(e) != 3 || r.SteadyImagesPerS != want {
		t.Errorf("steady %v images/s, want epochs 1-2's %v", r.SteadyImagesPerS, want)
	}
	if r.CreateS <= 0 || r.CreateS >= r.Seconds || e[1].ReadBytes <= 0 || r.SteadyMBPerS <= 0 {
		t.Errorf("created in %v s of %v s; epoch 1 read %d bytes, steady %v MB/s", r.CreateS, r.Seconds, e[1].ReadBytes, r.SteadyMBPerS)
	}
	var out bytes.Buffer
	printReport(&out, r)
	rows := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if k, v, ok := strings.Cut(l, "  "); ok {
			rows[k] = strings.TrimSpace(v)
		}
	}
	if got := rows["throughput"]; !strings.HasPrefix(got, fmt.Sprintf("%.1f images/s", r.SteadyImagesPerS)) || !strings.Contains(got, "steady state") {
		t.Errorf("throughput row %q: want the steady state, %.1f images/s", got, r.SteadyImagesPerS)
	}
	if got := rows["first epoch"]; !strings.HasPrefix(got, fmt.Sprintf("%.1f images/s", e[0].ImagesPerS)) {
		t.Errorf("first epoch row %q", got)
	}
	if got := rows["overall"]; !strings.HasPrefix(got, fmt.Sprintf("%.1f images/s", r.ImagesPerS)) || !strings.Contains(got, "loader creation") {
		t.Errorf("overall row %q", got)
	}
	if !strings.HasPrefix(rows["loader"], "created in") {
		t.Errorf("no loader creation row:\n%s", out.String())
	}

	one := benchJSON(t, dir, "--workers", "2")
	if one.SteadyImagesPerS != one.Epochs[0].ImagesPerS {
		t.Errorf("one epoch: steady %v, the epoch's %v", one.SteadyImagesPerS, one.Epochs[0].ImagesPerS)
	}
}
