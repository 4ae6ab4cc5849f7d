package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/internal/testenv"
)

// peerConfig is the Go program's defaults with args on top, on the IDX
// files in dir.
func peerConfig(t *testing.T, dir string, args ...string) config {
	t.Helper()
	var cfg config
	fs := flag.NewFlagSet("mnist", flag.ContinueOnError)
	comp := cfg.flags(fs)
	if err := fs.Parse(append([]string{"-data", dir}, args...)); err != nil {
		t.Fatal(err)
	}
	var err error
	if cfg.Compression, err = hvd.ParseCompression(*comp); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// writeTestIDX writes a small Fashion-MNIST-shaped set (the synthetic
// images, quantised to bytes) as the four IDX files the program reads.
func writeTestIDX(t *testing.T, dir string, nTrain, nTest int) {
	t.Helper()
	train, test := synthetic(nTrain, nTest, 11)
	for split, d := range map[string]*dataset{"train": train, "t10k": test} {
		pix := make([]byte, len(d.X))
		for i, v := range d.X {
			pix[i] = byte(math.Round(255 * v))
		}
		n := uint32(d.len())
		files := map[string][]byte{
			split + "-images-idx3-ubyte": idxBytes([]uint32{n, side, side}, pix),
			split + "-labels-idx1-ubyte": idxBytes([]uint32{n}, d.Labels),
		}
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestWriteInit(t *testing.T) {
	dir := t.TempDir()
	writeTestIDX(t, dir, 100, 10)
	cfg := peerConfig(t, dir, "-hidden", "8", "-epochs", "2", "-seed", "9")
	path := filepath.Join(dir, "init.bin")
	if err := writeInit(cfg, path, io.Discard); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(raw, []byte(initMagic)) {
		t.Fatalf("the file starts %q", raw[:min(len(raw), 30)])
	}
	r := bufio.NewReader(bytes.NewReader(raw[len(initMagic):]))
	line, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var h initHeader
	if err := json.Unmarshal(line, &h); err != nil {
		t.Fatal(err)
	}
	if h.Model != "mlp" || h.Hidden != 8 || h.Seed != 9 || h.Train != 100 || h.Epochs != 2 || len(h.Params) != 6 {
		t.Fatalf("header %+v", h)
	}
	m, err := newModel("mlp", 8, 9)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range m.params() {
		if h.Params[i].Name != p.Name || h.Params[i].Len != len(p.Value) {
			t.Fatalf("parameter %d is %+v, the model's %s has %d values", i, h.Params[i], p.Name, len(p.Value))
		}
		got := make([]float64, len(p.Value))
		if err := binary.Read(r, binary.LittleEndian, got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, p.Value) {
			t.Errorf("%s differs from the model's initial values", p.Name)
		}
	}
	for e := range 2 {
		got := make([]uint32, 100)
		if err := binary.Read(r, binary.LittleEndian, got); err != nil {
			t.Fatal(err)
		}
		for i, j := range hvd.ShuffledShard(100, 1, 0, 9, e) {
			if got[i] != uint32(j) {
				t.Fatalf("epoch %d's order differs at %d: %d, want %d", e, i, got[i], j)
			}
		}
	}
	if rest, _ := io.ReadAll(r); len(rest) != 0 {
		t.Errorf("%d bytes after the last epoch's order", len(rest))
	}
}

// torchPython is a python3 that imports torch; without one the test is
// skipped, or fails under GOROVOD_REQUIRE_TOOLS (test.sh installs
// python3-torch).
func torchPython(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(name)
		if err == nil && exec.Command(path, "-c", "import torch").Run() == nil {
			return path
		}
	}
	if testenv.Required(testenv.RequireTools) {
		t.Fatalf("no python3 with torch (apt-get install python3-torch), and %s is set", testenv.RequireTools)
	}
	t.Skip("no python3 with torch (apt-get install python3-torch)")
	return ""
}

// lossLines are the progress and epoch lines of out without their
// samples/s: what the Go program and its peer must print alike.
func lossLines(out string) []string {
	progress := regexp.MustCompile(`^epoch \d+ \[ *\d+/\d+\] loss \S+  lr \S+ `)
	epoch := regexp.MustCompile(`^epoch \d+: loss \S+  test accuracy \S+%`)
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if m := progress.FindString(l); m != "" {
			lines = append(lines, m)
		} else if m := epoch.FindString(l); m != "" {
			lines = append(lines, m)
		}
	}
	return lines
}

// TestTorchDDPPeerMatches runs peers/torch_ddp.py and the Go program at
// np 2 on the same small set, from the same -write-init file, and checks
// that they print the same losses, learning rates and accuracy: the peer
// trains the same model from the same weights on the same batches.
func TestTorchDDPPeerMatches(t *testing.T) {
	py := torchPython(t)
	dir := t.TempDir()
	writeTestIDX(t, dir, 480, 100)
	// 240 images a rank, 15 steps of 16; the warm-up runs over the epoch.
	args := []string{"-hidden", "32", "-batch", "16", "-epochs", "1", "-log-every", "1", "-seed", "5"}
	cfg := peerConfig(t, dir, args...)
	initFile := filepath.Join(dir, "init.bin")
	if err := writeInit(cfg, initFile, io.Discard); err != nil {
		t.Fatal(err)
	}

	var goOut bytes.Buffer
	err := hvdtest.Run(2, func(rt *hvd.Runtime) error {
		var out io.Writer
		if rt.Rank() == 0 {
			out = &goOut
		}
		_, err := train(context.Background(), rt, cfg, out)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join("peers", "torch_ddp.py"), "--np", "2", "--init", initFile,
		"--data", dir, "--epochs", "1", "--batch", "16", "--log-every", "1", "--threads", "1")
	cmd.WaitDelay = 5 * time.Second // the ranks die with the launcher; do not wait on their pipes
	pyOut, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("torch_ddp.py: %v\n%s", err, pyOut)
	}

	want, got := lossLines(goOut.String()), lossLines(string(pyOut))
	if len(want) != 15 {
		t.Fatalf("the Go program printed %d progress and epoch lines, want 15:\n%s", len(want), goOut.String())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the peer's lines differ from the Go program's\npeer:\n%s\nGo:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
