package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestReadmeShowsThisProgram: the README's "Training code" section shows
// this file from its package clause on, exactly, so the program a newcomer
// reads there is one that builds and runs.
func TestReadmeShowsThisProgram(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	body := string(src[strings.Index(string(src), "package main"):])
	if !strings.Contains(string(readme), "```go\n"+body+"```\n") {
		t.Error("README.md does not show examples/minimal/main.go from `package main` on in a go block; copy it there")
	}
}

// TestTrainsOnRanks builds gorun and this program and runs it alone and
// on 1, 2 and 3 ranks: every run ends with a model near y = 3x - 1.
func TestTrainsOnRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and launches programs")
	}
	dir := t.TempDir()
	for pkg, out := range map[string]string{".": "minimal", "../../cmd/gorun": "gorun"} {
		if b, err := exec.Command("go", "build", "-o", filepath.Join(dir, out), pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	last := regexp.MustCompile(`epoch 5: loss ([0-9.]+), w = (-?[0-9.]+), b = (-?[0-9.]+) \(np (\d+)\)`)
	for _, np := range []int{0, 2, 3} {
		cmd := exec.Command(filepath.Join(dir, "minimal"))
		if np > 0 {
			cmd = exec.Command(filepath.Join(dir, "gorun"), "-np", strconv.Itoa(np), filepath.Join(dir, "minimal"))
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("np %d: %v\n%s", np, err, out)
		}
		m := last.FindStringSubmatch(string(out))
		if m == nil {
			t.Fatalf("np %d: no final epoch line in\n%s", np, out)
		}
		loss, _ := strconv.ParseFloat(m[1], 64)
		w, _ := strconv.ParseFloat(m[2], 64)
		b, _ := strconv.ParseFloat(m[3], 64)
		if want := max(np, 1); m[4] != strconv.Itoa(want) {
			t.Errorf("np %d: the job had %s ranks, want %d", np, m[4], want)
		}
		// The noise's variance is 0.01: a fitted line's loss is close to it.
		if loss > 0.02 || w < 2.9 || w > 3.1 || b < -1.1 || b > -0.9 {
			t.Errorf("np %d: loss %v, w %v, b %v; want about 0.01, 3, -1", np, loss, w, b)
		}
	}
}
