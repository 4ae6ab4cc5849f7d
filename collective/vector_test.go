package collective_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

// plainTransport hides every optional interface of its links (Vectored
// among them), so that AllreduceVec gathers and scatters itself.
type plainTransport struct{ collective.Transport }

func (p plainTransport) Conn(peer int) collective.Conn {
	return struct{ collective.Conn }{p.Transport.Conn(peer)}
}

// randomParts cuts buf into parts of whole elements of esz bytes at
// random places: empty parts, one-element parts and long ones.
func randomParts(rng *rand.Rand, buf []byte, esz int) [][]byte {
	var parts [][]byte
	for len(buf) > 0 {
		var n int
		switch rng.IntN(4) {
		case 0:
			n = 0
		case 1:
			n = 1
		case 2:
			n = rng.IntN(64)
		default:
			n = rng.IntN(len(buf)/esz + 1)
		}
		n = min(n*esz, len(buf))
		parts = append(parts, buf[:n])
		buf = buf[n:]
	}
	return append(parts, buf) // and an empty last part
}

// randomValues fills a buffer of count dt elements with values whose sums
// round differently in different orders (integers stay small enough not
// to overflow).
func randomValues(rng *rand.Rand, dt kernels.DType, count int) []byte {
	b := make([]byte, count*dt.Size())
	for i := range count {
		v := rng.NormFloat64() * 1e3
		switch dt {
		case kernels.F64:
			binary.LittleEndian.PutUint64(b[i*8:], math.Float64bits(v))
		case kernels.F32:
			binary.LittleEndian.PutUint32(b[i*4:], math.Float32bits(float32(v)))
		case kernels.I32:
			binary.LittleEndian.PutUint32(b[i*4:], uint32(int32(v)))
		}
	}
	return b
}

// TestAllreduceVec: an all-reduce of parts, cut at random places, gives
// every rank the same bytes as Allreduce of the parts end to end in one
// buffer, on every kind of link (and on links that cannot gather, where
// AllreduceVec copies), with 3 ranks and more, inline and pipelined
// through segments that span many parts and parts that span segments.
func TestAllreduceVec(t *testing.T) {
	kinds := append(meshtest.Kinds(), meshtest.Kind{Name: "plain", Make: func(t testing.TB, n int) []collective.Transport {
		ts := meshtest.Mem(t, n)
		for i, tr := range ts {
			ts[i] = plainTransport{tr}
		}
		return ts
	}})
	type op struct {
		op kernels.Op
		o  collective.ReduceOptions
	}
	ops := []op{{kernels.Sum, collective.ReduceOptions{}}, {kernels.Average, collective.ReduceOptions{Prescale: 0.5, Postscale: 3}}, {kernels.Max, collective.ReduceOptions{}}}
	for _, k := range kinds {
		for _, n := range []int{1, 3, 4} {
			t.Run(fmt.Sprintf("%s/n=%d", k.Name, n), func(t *testing.T) {
				cs := meshtest.Comms(t, k.Make, n, collective.Options{SegmentBytes: 8 << 10})
				rng := rand.New(rand.NewPCG(uint64(n), 7))
				for i, dt := range []kernels.DType{kernels.F64, kernels.F32, kernels.I32} {
					for _, count := range []int{0, 1, 999, 50_000} {
						o := ops[(i+count)%len(ops)]
						if dt == kernels.I32 && o.op == kernels.Average {
							o = ops[0]
						}
						vecCase(t, cs, rng, dt, o.op, o.o, count)
					}
				}
			})
		}
	}
}

// vecCase runs one AllreduceVec of random data on cs and the same
// Allreduce on whole buffers, and compares them byte for byte.
func vecCase(t *testing.T, cs []*collective.Comm, rng *rand.Rand, dt kernels.DType, op kernels.Op, o collective.ReduceOptions, count int) {
	t.Helper()
	n := len(cs)
	in, whole, vec, parts := make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][][]byte, n)
	for r := range n {
		in[r] = randomValues(rng, dt, count)
		whole[r], vec[r] = bytes.Clone(in[r]), bytes.Clone(in[r])
		parts[r] = randomParts(rng, vec[r], dt.Size()) // each rank cuts its own
	}
	ctx := context.Background()
	meshtest.MustAll(t, onAll(t, cs, 60*time.Second, func(r int, c *collective.Comm) error {
		return c.Allreduce(ctx, dt, whole[r], op, o)
	}))
	meshtest.MustAll(t, onAll(t, cs, 60*time.Second, func(r int, c *collective.Comm) error {
		return c.AllreduceVec(ctx, dt, parts[r], op, o)
	}))
	for r := range n {
		if !bytes.Equal(vec[r], whole[r]) {
			t.Fatalf("%v %v count %d rank %d (%d parts): AllreduceVec differs from Allreduce", dt, op, count, r, len(parts[r]))
		}
	}
	if n > 1 && count > 0 && bytes.Equal(whole[0], in[0]) {
		t.Fatalf("%v %v count %d: the all-reduce left rank 0's data as it was", dt, op, count)
	}
}

// TestAllreduceVecInvalid: a part that is not a whole number of elements
// is an argument error, before anything is sent.
func TestAllreduceVecInvalid(t *testing.T) {
	cs := meshtest.Comms(t, meshtest.Mem, 1, collective.Options{})
	err := cs[0].AllreduceVec(context.Background(), kernels.F32, [][]byte{make([]byte, 8), make([]byte, 6)}, kernels.Sum, collective.ReduceOptions{})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("6 bytes is not a whole number of float32")) {
		t.Fatalf("err = %v, want the 6-byte part refused", err)
	}
}
