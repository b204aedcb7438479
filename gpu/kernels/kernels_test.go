package kernels

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The PTX's arithmetic must be IEEE-exact to match the host: correctly rounded division,
// no approximations, no fused multiply-adds; and it must declare the three entry points
// with the twelve parameters package gpu passes.
func TestPTXShape(t *testing.T) {
	for _, bad := range []string{"fma.", "div.approx", "div.full", "rcp.approx", ".ftz"} {
		if strings.Contains(PTX, bad) {
			t.Errorf("PTX contains %q", bad)
		}
	}
	if !strings.Contains(PTX, "div.rn.f32") {
		t.Error("PTX has no div.rn.f32")
	}
	for _, name := range []string{F32, F16, BF16} {
		re := regexp.MustCompile(`(?s)\.visible \.entry ` + name + `\((.*?)\)`)
		m := re.FindStringSubmatch(PTX)
		if m == nil {
			t.Errorf("no entry point %s", name)
			continue
		}
		params := strings.Count(m[1], ".param")
		want := ".param .u64 " + name + "_param_0"
		if params != 12 || !strings.Contains(m[1], want) || !strings.Contains(m[1], ".param .f32 "+name+"_param_11") {
			t.Errorf("%s has %d parameters: %s", name, params, m[1])
		}
	}
	if !strings.Contains(PTX, "cvt.rn.f16.f32") {
		t.Error("float16 kernel does not round to nearest even")
	}
}

// convert.ptx is what gen.sh makes from body.ll and nvptx.ll, so the sources the tests
// check are the kernels that run. Needs LLVM 14's tools (Debian llvm); the exact text
// depends on the LLVM version, so other versions skip.
func TestPTXUpToDate(t *testing.T) {
	for _, tool := range []string{"llvm-link", "opt", "llc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found (Debian package llvm): cannot regenerate the PTX", tool)
		}
	}
	out, err := exec.Command("llc", "--version").Output()
	if err != nil || !strings.Contains(string(out), "LLVM version 14.") {
		t.Skipf("convert.ptx comes from LLVM 14; this llc is another version")
	}
	dir := t.TempDir()
	for _, f := range []string{"body.ll", "nvptx.ll", "gen.sh"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("bash", filepath.Join(dir, "gen.sh")).CombinedOutput(); err != nil {
		t.Fatalf("gen.sh: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "convert.ptx"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != PTX {
		t.Error("convert.ptx is stale: run gpu/kernels/gen.sh")
	}
}
