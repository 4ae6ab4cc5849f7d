package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/gorovod/gorovod/hvd"
)

// initMagic is the first line of a -write-init file.
const initMagic = "gorovod-mnist-init 1\n"

// initHeader is the second line of a -write-init file, JSON: what the
// binary part after it holds.
type initHeader struct {
	Model  string      `json:"model"`
	Hidden int         `json:"hidden"`
	Seed   uint64      `json:"seed"`
	Train  int         `json:"train_images"` // length of each permutation
	Epochs int         `json:"epochs"`       // permutations in the file
	Params []initParam `json:"params"`
	Note   string      `json:"data"` // where the training set came from
}

// initParam names one parameter of the file, in the model's order.
type initParam struct {
	Name string `json:"name"`
	Len  int    `json:"len"`
}

// writeInit writes what a peer in another framework needs to start where
// this program starts: the initial parameters (rank 0's, which
// hvd.BroadcastParameters gives every rank) and the permutation of the
// training set of each of cfg.Epochs epochs (the one hvd.ShuffledShard
// strides over: rank r of n takes its items r, r+n, …). Both come from Go's
// math/rand/v2 generators, which the peer need not reproduce.
//
// The file is the line initMagic, one line of JSON (initHeader), then each
// parameter's values in order as little-endian float64 (a dense layer's
// weights row-major, inputs × outputs), then each epoch's permutation as
// little-endian uint32. examples/mnist/peers/torch_ddp.py reads it.
func writeInit(cfg config, path string, out io.Writer) error {
	train, _, note, err := loadData(cfg.DataDir, cfg.SynthTrain, cfg.SynthTest, cfg.Seed)
	if err != nil {
		return err
	}
	m, err := newModel(cfg.Model, cfg.Hidden, cfg.Seed)
	if err != nil {
		return err
	}
	if train.len() > math.MaxUint32 {
		return fmt.Errorf("%d training images are too many for the file's uint32 indices", train.len())
	}
	h := initHeader{Model: cfg.Model, Hidden: cfg.Hidden, Seed: cfg.Seed, Train: train.len(), Epochs: cfg.Epochs, Note: note}
	for _, p := range m.params() {
		h.Params = append(h.Params, initParam{Name: p.Name, Len: len(p.Value)})
	}
	js, err := json.Marshal(h)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	w.WriteString(initMagic)
	w.Write(js)
	w.WriteByte('\n')
	var b [8]byte
	for _, p := range m.params() {
		for _, v := range p.Value {
			binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
			w.Write(b[:])
		}
	}
	for e := range cfg.Epochs {
		for _, i := range hvd.ShuffledShard(train.len(), 1, 0, cfg.Seed, e) {
			binary.LittleEndian.PutUint32(b[:4], uint32(i))
			w.Write(b[:4])
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s\nwrote the %s's initial parameters and %d epochs' data order (seed %d) to %s\n", note, cfg.Model, cfg.Epochs, cfg.Seed, path)
	return nil
}
