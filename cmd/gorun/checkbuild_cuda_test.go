//go:build cuda

package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// This test needs a GPU: with the cuda tag, gorgonia.org/cu ends the test
// process on a machine without one before any test runs.

// TestCheckBuildCUDA: a cuda build reports the CUDA version its driver
// supports and at least one visible GPU by name, all marked present.
func TestCheckBuildCUDA(t *testing.T) {
	fs := cudaFeatures()
	var lines []string
	for _, f := range fs {
		lines = append(lines, f.line())
	}
	text := strings.Join(lines, "\n")
	if len(fs) < 2 {
		t.Fatalf("CUDA lines:\n%s\nwant the driver and at least one GPU", text)
	}
	if !regexp.MustCompile(`^\[X\] CUDA \(driver supports CUDA [1-9][0-9]*\.[0-9]+\)$`).MatchString(fs[0].line()) {
		t.Errorf("first CUDA line %q, want %q", fs[0].line(), "[X] CUDA (driver supports CUDA MAJOR.MINOR)")
	}
	gpu := regexp.MustCompile(`^\[X\] GPU [0-9]+ \(.+\)$`)
	for i, f := range fs[1:] {
		if !gpu.MatchString(f.line()) || f.name != "GPU "+strconv.Itoa(i) {
			t.Errorf("line %q, want %q", f.line(), "[X] GPU "+strconv.Itoa(i)+" (NAME)")
		}
	}
}
