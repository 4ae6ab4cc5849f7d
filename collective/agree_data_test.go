package collective_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

// TestAgreeData: data that travel after the vector (AgreeRider.Apart),
// in a job of two ranks, are reduced in place, bit for bit as Allreduce
// reduces them, when both ranks' flags read 1, and left exactly as they
// were when either rank's flag is 0; the vector is Min-reduced either way.
// On every kind of link, and on links that cannot gather, where the
// message is gathered through a buffer.
func TestAgreeData(t *testing.T) {
	kinds := append(meshtest.Kinds(), meshtest.Kind{Name: "plain", Make: func(t testing.TB, n int) []collective.Transport {
		ts := meshtest.Mem(t, n)
		for i, tr := range ts {
			ts[i] = plainTransport{tr}
		}
		return ts
	}})
	const vecLen, answers, flag = 16, 4, 12
	sum, err := kernels.Lookup(kernels.F64, kernels.Sum)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		t.Run(k.Name, func(t *testing.T) {
			cs := meshtest.Comms(t, k.Make, 2, collective.Options{})
			rng := rand.New(rand.NewPCG(2, 9))
			for _, flags := range [][2]byte{{1, 1}, {1, 0}, {0, 1}, {0, 0}, {1, 1}} {
				in := [2][]byte{randomValues(rng, kernels.F64, 300), randomValues(rng, kernels.F64, 300)}
				data := [2][]byte{bytes.Clone(in[0]), bytes.Clone(in[1])}
				whole := [2][]byte{bytes.Clone(in[0]), bytes.Clone(in[1])}
				vs := [2][]byte{}
				for r := range 2 {
					vs[r] = bytes.Repeat([]byte{byte(5 + r)}, vecLen)
					for i := answers; i < answers+2; i++ {
						vs[r][i] = collective.AnswerOK
					}
					vs[r][flag] = flags[r]
				}
				ctx := context.Background()
				meshtest.MustAll(t, onAll(t, cs, 30*time.Second, func(r int, c *collective.Comm) error {
					return c.Agree(ctx, vs[r], collective.AgreeOptions{Answers: answers, Rider: collective.AgreeRider{Reduce: sum, Apart: data[r], If: flag}})
				}))
				meshtest.MustAll(t, onAll(t, cs, 30*time.Second, func(r int, c *collective.Comm) error {
					return c.Allreduce(ctx, kernels.F64, whole[r], kernels.Sum, collective.ReduceOptions{})
				}))
				for r := range 2 {
					if vs[r][0] != 5 || vs[r][flag] != min(flags[0], flags[1]) {
						t.Fatalf("flags %v, rank %d: vector %v, want the Min of both", flags, r, vs[r])
					}
					want := in[r]
					if flags == [2]byte{1, 1} {
						want = whole[r]
					}
					if !bytes.Equal(data[r], want) {
						t.Fatalf("flags %v, rank %d: the data are not what Allreduce gives (both 1) or the input (else)", flags, r)
					}
				}
			}
		})
	}
}

// TestAgreeDataNeedsTwoRanks: separate data are refused in a job of
// three ranks (the exchange has several steps), without a reduction, and
// with a flag outside the vector.
func TestAgreeDataNeedsTwoRanks(t *testing.T) {
	sum, err := kernels.Lookup(kernels.F64, kernels.Sum)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		n      int
		reduce kernels.ReduceFunc
		flag   int
	}{{"three ranks", 3, sum, 10}, {"no reduction", 2, nil, 10}, {"flag outside", 2, sum, 16}} {
		t.Run(c.name, func(t *testing.T) {
			cs := meshtest.Comms(t, meshtest.Mem, c.n, collective.Options{})
			errs := onAll(t, cs, 30*time.Second, func(r int, cm *collective.Comm) error {
				v := make([]byte, 16)
				for i := range c.n {
					v[4+i] = collective.AnswerOK
				}
				return cm.Agree(context.Background(), v, collective.AgreeOptions{Answers: 4, Rider: collective.AgreeRider{Reduce: c.reduce, Apart: make([]byte, 8), If: c.flag}})
			})
			for r, err := range errs {
				if !errors.Is(err, collective.ErrInvalid) {
					t.Fatalf("rank %d: %v, want ErrInvalid", r, err)
				}
			}
		})
	}
}
