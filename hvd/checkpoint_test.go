package hvd_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/internal/testutil"
)

// quiet discards the warnings about skipped checkpoints.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func checkpointAt(step int64) *hvd.Checkpoint {
	return &hvd.Checkpoint{
		Epoch: int(step / 10), Step: step, Seed: 7, RNG: []byte{1, 2, 3},
		Params:    map[string][]float64{"w": {float64(step), -1}},
		Optimizer: hvd.OptimizerState{Steps: step, LR: 0.1, Slots: map[string][]float64{"momentum/w": {0.5, 0}}},
		Meta:      map[string]string{"model": "linreg"},
	}
}

func TestCheckpointFileRoundTripAndDamage(t *testing.T) {
	want := checkpointAt(12)
	b, err := hvd.EncodeCheckpoint(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := hvd.DecodeCheckpoint(b)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	flipped := append([]byte(nil), b...)
	flipped[len(flipped)-3] ^= 0x10
	damaged := map[string][]byte{
		"empty":            nil,
		"header only":      b[:20],
		"truncated":        b[:len(b)-1],
		"longer":           append(append([]byte(nil), b...), 0),
		"flipped payload":  flipped,
		"not a checkpoint": []byte("GRVDCKP2" + string(b[8:])),
	}
	for name, d := range damaged {
		if _, err := hvd.DecodeCheckpoint(d); !errors.Is(err, hvd.ErrBadCheckpoint) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestLatestSkipsDamagedCheckpoints(t *testing.T) {
	rt := hvdtest.Start(t, 1)[0]
	c := &hvd.Checkpointer{Dir: filepath.Join(t.TempDir(), "ckpt"), Logger: quiet}
	if ck, _, err := c.Latest(); ck != nil || err != nil {
		t.Fatalf("no directory yet: %v, %v", ck, err)
	}
	for s := int64(1); s <= 4; s++ {
		if err := c.Save(rt, checkpointAt(s)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.TruncateHalf(t, c.Path(4))
	flipMiddle(t, c.Path(3))
	os.WriteFile(filepath.Join(c.Dir, "checkpoint-000000000099.ckpt.bak"), []byte("x"), 0o644) // not ours
	ck, path, err := c.Latest()
	if err != nil || ck.Step != 2 || path != c.Path(2) {
		t.Fatalf("Latest = step %v at %s, %v; want step 2", ck, path, err)
	}
	if err := c.Save(rt, checkpointAt(5)); err != nil {
		t.Fatal(err)
	}
	if ck, _, _ := c.Latest(); ck.Step != 5 {
		t.Errorf("after a new save, Latest is step %d", ck.Step)
	}
}

func TestSaveKeepsTheLastK(t *testing.T) {
	rt := hvdtest.Start(t, 1)[0]
	c := &hvd.Checkpointer{Dir: t.TempDir(), Keep: 2, Logger: quiet}
	os.WriteFile(filepath.Join(c.Dir, ".checkpoint-123.tmp"), []byte("half a save"), 0o644)
	for s := int64(10); s <= 50; s += 10 {
		if err := c.Save(rt, checkpointAt(s)); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(c.Dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{"checkpoint-000000000040.ckpt", "checkpoint-000000000050.ckpt"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("directory holds %v, want %v", names, want)
	}
}

// TestWriteWithoutARuntime: Write needs no runtime (a parameter-server
// chief has none), creates the directory, prunes beyond Keep, and what it
// wrote is what Latest reads.
func TestWriteWithoutARuntime(t *testing.T) {
	c := &hvd.Checkpointer{Dir: filepath.Join(t.TempDir(), "new"), Keep: 2, Logger: quiet}
	for s := int64(10); s <= 30; s += 10 {
		if err := c.Write(checkpointAt(s)); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(c.Dir)
	if len(entries) != 2 {
		t.Errorf("directory holds %d files, want 2 (Keep)", len(entries))
	}
	ck, _, err := c.Latest()
	if err != nil || ck == nil || !reflect.DeepEqual(ck, checkpointAt(30)) {
		t.Fatalf("Latest = %+v, %v; want the checkpoint of step 30", ck, err)
	}
}

func TestLoadLatestComesFromRankZero(t *testing.T) {
	rts := hvdtest.Start(t, 3)
	root := t.TempDir()
	c0 := &hvd.Checkpointer{Dir: root, Logger: quiet}
	if err := c0.Save(rts[0], checkpointAt(3)); err != nil {
		t.Fatal(err)
	}
	if err := c0.Save(rts[0], checkpointAt(6)); err != nil {
		t.Fatal(err)
	}
	testutil.TruncateHalf(t, c0.Path(6))
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		c := c0
		if r > 0 { // other hosts: an empty directory of their own
			c = &hvd.Checkpointer{Dir: filepath.Join(t.TempDir(), fmt.Sprint(r))}
		}
		ck, err := c.LoadLatest(context.Background(), rt)
		if err != nil {
			return err
		}
		if ck == nil || !reflect.DeepEqual(ck, checkpointAt(3)) {
			return fmt.Errorf("loaded %+v, want rank 0's step 3", ck)
		}
		return c.Save(rt, checkpointAt(9)) // a no-op beyond rank 0
	})
	if _, err := os.Stat(c0.Path(9)); err != nil {
		t.Error(err)
	}
}

func TestLoadLatestWithoutCheckpoints(t *testing.T) {
	rts := hvdtest.Start(t, 2)
	c := &hvd.Checkpointer{Dir: filepath.Join(t.TempDir(), "none")}
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		ck, err := c.LoadLatest(context.Background(), rt)
		if ck != nil || err != nil {
			return fmt.Errorf("got %v, %v; want nothing", ck, err)
		}
		return nil
	})
}

func TestRestoreChecksTheModel(t *testing.T) {
	p := hvd.NewParam("w", 2)
	sgd, _ := hvd.NewSGD([]*hvd.Param{p}, hvd.SGDConfig{Momentum: 0.9})
	if err := checkpointAt(4).Restore(sgd); err != nil {
		t.Fatal(err)
	}
	if p.Value[0] != 4 || sgd.State().Steps != 4 || sgd.State().Slots["momentum/w"][0] != 0.5 {
		t.Errorf("restored %v, %+v", p.Value, sgd.State())
	}
	round := hvd.NewCheckpoint(sgd, 0, 4)
	if !reflect.DeepEqual(round.Params, checkpointAt(4).Params) {
		t.Errorf("NewCheckpoint captured %v", round.Params)
	}
	other, _ := hvd.NewSGD([]*hvd.Param{hvd.NewParam("v", 2)}, hvd.SGDConfig{})
	if err := checkpointAt(4).Restore(other); !errors.Is(err, hvd.ErrBadCheckpoint) {
		t.Errorf("another model: %v", err)
	}
	short, _ := hvd.NewSGD([]*hvd.Param{hvd.NewParam("w", 3)}, hvd.SGDConfig{})
	if err := checkpointAt(4).Restore(short); !errors.Is(err, hvd.ErrBadCheckpoint) {
		t.Errorf("another length: %v", err)
	}
	short32, _ := hvd.NewSGD([]*hvd.Param{hvd.NewParam32("w", 3)}, hvd.SGDConfig{})
	if err := checkpointAt(4).Restore(short32); !errors.Is(err, hvd.ErrBadCheckpoint) {
		t.Errorf("another length, float32: %v", err)
	}
}

func TestCheckpointOfFloat32Params(t *testing.T) {
	w := hvd.NewParam32("w", 3)
	copy(w.Value32, []float32{0.1, -2.5, 1e-30})
	sgd, _ := hvd.NewSGD([]*hvd.Param{w}, hvd.SGDConfig{})
	ck := hvd.NewCheckpoint(sgd, 1, 7)
	if got := ck.Params["w"]; !reflect.DeepEqual(got, []float64{float64(float32(0.1)), -2.5, float64(float32(1e-30))}) {
		t.Errorf("captured %v", got)
	}
	path := filepath.Join(t.TempDir(), "ck")
	if err := hvd.WriteCheckpoint(path, ck); err != nil {
		t.Fatal(err)
	}
	back, err := hvd.ReadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	v := hvd.NewParam32("w", 3)
	other, _ := hvd.NewSGD([]*hvd.Param{v}, hvd.SGDConfig{})
	if err := back.Restore(other); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v.Value32, w.Value32) {
		t.Errorf("restored %v, want %v", v.Value32, w.Value32)
	}
}

// TestReadCheckpointBounded: ReadCheckpoint stops at a header that is no
// checkpoint's, even on an endless file such as /dev/zero, and reads at
// most one byte past the payload its header gives, so a longer file is
// refused without being read whole.
func TestReadCheckpointBounded(t *testing.T) {
	b, err := hvd.EncodeCheckpoint(checkpointAt(3))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	longer := filepath.Join(dir, "longer")
	if err := os.WriteFile(good, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(longer, append(append([]byte(nil), b...), make([]byte, 8<<20)...), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := hvd.ReadCheckpoint(good); err != nil || !reflect.DeepEqual(got, checkpointAt(3)) {
		t.Fatalf("ReadCheckpoint(good) = %+v, %v", got, err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, path := range []string{"/dev/zero", "/dev/urandom", longer} {
		if _, err := hvd.ReadCheckpoint(path); !errors.Is(err, hvd.ErrBadCheckpoint) || !strings.Contains(err.Error(), path) {
			t.Errorf("ReadCheckpoint(%s) = %v, want ErrBadCheckpoint naming it", path, err)
		}
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("reading them allocated %d MiB", alloc>>20)
	}
}

// flipMiddle damages a checkpoint 30 bytes past its middle, inside the
// encoded state.
func flipMiddle(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	testutil.FlipBit(t, path, int(fi.Size()/2)+30)
}
