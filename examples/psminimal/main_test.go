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

// TestReadmeShowsThisProgram: the README's "Parameter servers" section
// shows this file from its package clause on, exactly, so the program a
// reader copies from there builds and runs.
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
		t.Error("README.md does not show examples/psminimal/main.go from `package main` on in a go block; copy it there")
	}
}

// TestTrainsUnderGorun builds gorun and this program and runs it under
// gorun --ps 1 -np 2 and --ps 2 -np 3: each job's chief ends with a model
// near y = 3x - 1.
func TestTrainsUnderGorun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and launches programs")
	}
	dir := t.TempDir()
	for pkg, out := range map[string]string{".": "psminimal", "../../cmd/gorun": "gorun"} {
		if b, err := exec.Command("go", "build", "-o", filepath.Join(dir, out), pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	last := regexp.MustCompile(`epoch 5: loss ([0-9.]+), w = (-?[0-9.]+), b = (-?[0-9.]+) \((\d+) workers\)`)
	for _, c := range [][2]int{{1, 2}, {2, 3}} {
		servers, workers := strconv.Itoa(c[0]), strconv.Itoa(c[1])
		out, err := exec.Command(filepath.Join(dir, "gorun"), "--ps", servers, "-np", workers, filepath.Join(dir, "psminimal")).CombinedOutput()
		if err != nil {
			t.Fatalf("--ps %s -np %s: %v\n%s", servers, workers, err, out)
		}
		m := last.FindStringSubmatch(string(out))
		if m == nil {
			t.Fatalf("--ps %s -np %s: no final epoch line in\n%s", servers, workers, out)
		}
		loss, _ := strconv.ParseFloat(m[1], 64)
		w, _ := strconv.ParseFloat(m[2], 64)
		b, _ := strconv.ParseFloat(m[3], 64)
		if n, _ := strconv.Atoi(m[4]); n < 1 || n > c[1] {
			t.Errorf("--ps %s -np %s: the chief had %s workers", servers, workers, m[4])
		}
		// The noise's variance is 0.01: a fitted line's loss is close to it.
		if loss > 0.02 || w < 2.9 || w > 3.1 || b < -1.1 || b > -0.9 {
			t.Errorf("--ps %s -np %s: loss %v, w %v, b %v; want about 0.01, 3, -1", servers, workers, loss, w, b)
		}
	}
}
