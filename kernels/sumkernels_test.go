package kernels

import (
	"go/build"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSumKernelsConstraints checks that the build constraints of the two
// SumKernels files pick the assembly description exactly where gonum's
// internal/asm/f32 and f64 compile their assembly AXPY, for a few
// architectures and tag sets.
func TestSumKernelsConstraints(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to locate gonum's sources")
	}
	out, err := exec.Command(goCmd, "list", "-m", "-f", "{{.Dir}}", "gonum.org/v1/gonum").Output()
	if err != nil {
		t.Fatalf("go list -m gonum.org/v1/gonum: %v", err)
	}
	gonum := strings.TrimSpace(string(out))
	if gonum == "" {
		t.Fatal("go list -m gonum.org/v1/gonum: no directory")
	}
	asmDir := filepath.Join(gonum, "internal", "asm")
	for _, arch := range []string{"amd64", "arm64", "386", "riscv64"} {
		for _, tags := range [][]string{nil, {"noasm"}, {"safe"}, {"gccgo"}, {"noasm", "safe"}, {"cuda"}} {
			ctx := build.Default
			ctx.GOOS, ctx.GOARCH, ctx.BuildTags = "linux", arch, tags
			match := func(dir, name string) bool {
				t.Helper()
				ok, err := ctx.MatchFile(dir, name)
				if err != nil {
					t.Fatalf("%s/%s: %v", dir, name, err)
				}
				return ok
			}
			ours, oursNot := match(".", "sumkernels_asm.go"), match(".", "sumkernels_noasm.go")
			if ours == oursNot {
				t.Errorf("%s %v: sumkernels_asm.go %v, sumkernels_noasm.go %v: want exactly one", arch, tags, ours, oursNot)
			}
			for _, pkg := range []string{"f32", "f64"} {
				dir := filepath.Join(asmDir, pkg)
				asm, noasm := match(dir, "stubs_amd64.go"), match(dir, "stubs_noasm.go")
				if asm == noasm {
					t.Fatalf("%s %v: gonum %s: stubs_amd64.go %v, stubs_noasm.go %v: the test's assumptions about gonum no longer hold", arch, tags, pkg, asm, noasm)
				}
				if asm != ours {
					t.Errorf("%s %v: gonum %s assembly %v, SumKernels says assembly %v", arch, tags, pkg, asm, ours)
				}
			}
		}
	}
}
