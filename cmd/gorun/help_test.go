package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// update rewrites the golden files: go test ./cmd/gorun -run Help -update.
var update = flag.Bool("update", false, "rewrite testdata/*.golden from what gorun prints")

// helpText is what gorun --help prints.
func helpText(t *testing.T) string {
	t.Helper()
	var out bytes.Buffer
	if code := run(context.Background(), []string{"gorun", "--help"}, &out, &out); code != 0 {
		t.Fatalf("--help: exit %d\n%s", code, out.String())
	}
	return out.String()
}

// TestHelpGolden: gorun --help prints exactly testdata/help.golden, so that
// a change to any flag's text shows in review (rewrite it with -update).
func TestHelpGolden(t *testing.T) {
	got := helpText(t)
	path := filepath.Join("testdata", "help.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("--help differs from %s at line %d (go test ./cmd/gorun -run HelpGolden -update rewrites it):\n got %q\nwant %q", path, i+1, g, w)
			}
		}
	}
}

// flagName is a flag as the README's table writes it: -np, --hosts.
var flagName = regexp.MustCompile("(?:^|[\\s`,(])(--?[A-Za-z][A-Za-z0-9-]*)")

// readmeFlags returns the flag names in the first column of the README's
// table of gorun's flags, without dashes.
func readmeFlags(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "\n| flag | meaning |\n|---|---|\n")
	if !ok {
		t.Fatal("README.md has no table headed | flag | meaning |")
	}
	var names []string
	for line := range strings.Lines(table) {
		if !strings.HasPrefix(line, "| ") {
			break
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " | ")
		for _, m := range flagName.FindAllStringSubmatch(first, -1) {
			names = append(names, strings.TrimLeft(m[1], "-"))
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// helpFlags returns every name and alias of the flags gorun --help lists.
func helpFlags(t *testing.T) []string {
	t.Helper()
	var names []string
	for line := range strings.Lines(helpText(t)) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "-") {
			continue
		}
		// "--np value, -n value, --num-proc value  number of ..."
		spec, _, _ := strings.Cut(line, "  ")
		for _, part := range strings.Split(spec, ", ") {
			name, _, _ := strings.Cut(part, " ")
			names = append(names, strings.TrimLeft(name, "-"))
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// TestReadmeFlagTable: the README's table of flags names exactly the flags
// (and aliases) that gorun --help lists.
func TestReadmeFlagTable(t *testing.T) {
	readme, help := readmeFlags(t), helpFlags(t)
	if len(help) < 30 {
		t.Fatalf("read only %d flags from --help: %q", len(help), help)
	}
	for _, n := range help {
		if !slices.Contains(readme, n) {
			t.Errorf("gorun --help lists %s; the README's flag table does not", dashed(n))
		}
	}
	for _, n := range readme {
		if !slices.Contains(help, n) {
			t.Errorf("the README's flag table names %s; gorun --help does not list it", dashed(n))
		}
	}
}
