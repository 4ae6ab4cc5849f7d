package tcptransport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport/shm"
	"github.com/gorovod/gorovod/kernels"
)

// remoteReads sums the payloads that tr's shared-memory links copied
// straight from their peers' memory.
func remoteReads(tr collective.Transport) int64 {
	n := int64(0)
	for _, c := range tr.(*transport).conns {
		if c == nil {
			continue
		}
		if l, ok := c.link.(*shm.Link); ok {
			n += l.RemoteReads()
		}
	}
	return n
}

// putElem stores the small integer v as element i of buf, of type dt.
func putElem(dt kernels.DType, buf []byte, i int, v float64) {
	switch dt {
	case kernels.F32:
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(float32(v)))
	case kernels.F64:
		binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(v))
	case kernels.F16:
		binary.LittleEndian.PutUint16(buf[2*i:], uint16(kernels.ToFloat16(float32(v))))
	}
}

// elemSize is the bytes of an element of dt.
func elemSize(dt kernels.DType) int {
	return map[kernels.DType]int{kernels.F32: 4, kernels.F64: 8, kernels.F16: 2}[dt]
}

// TestShmRemoteAllreduce runs pipelined all-reduces whose segments lie
// below, at and above the least remote frame (shm.RemoteFloor), in
// float32, float64 and float16, with odd element counts, among 2, 3 and 4
// ranks: with remote frames on (each receiver copies from its sender's
// memory), refused by every receiver (the senders fall back to the
// rings), and off. Every result must be exact (small integers), and the
// remote path must have been taken only where it was on.
func TestShmRemoteAllreduce(t *testing.T) {
	const seg = 2 * shm.RemoteFloor
	modes := []struct {
		name   string
		tun    tuning
		remote bool
	}{
		{"remote", tuning{remoteMin: shm.RemoteFloor}, true},
		{"refused", tuning{remoteMin: shm.RemoteFloor, refuseRemote: true}, false},
		{"off", tuning{remoteMin: -1}, false},
	}
	for _, n := range []int{2, 3, 4} {
		for _, mode := range modes {
			t.Run(fmt.Sprintf("n%d/%s", n, mode.name), func(t *testing.T) {
				m := meshTuned(t, n, Config{}, mode.tun)
				cs := make([]*collective.Comm, n)
				for r := range n {
					cs[r] = collective.NewComm(m[r], collective.Options{SegmentBytes: seg})
				}
				for _, dt := range []kernels.DType{kernels.F32, kernels.F64, kernels.F16} {
					esz := elemSize(dt)
					floor := shm.RemoteFloor / esz
					// Each rank's chunk: three segments and a tail
					// of one element less than, exactly and one more
					// than the floor; the last count is odd.
					for _, chunk := range []int{3*seg/esz + floor - 1, 3*seg/esz + floor, 3*seg/esz + floor + 1} {
						allreduceExact(t, cs, dt, n*chunk+n-1)
					}
				}
				reads := int64(0)
				for _, tr := range m {
					reads += remoteReads(tr)
				}
				if mode.remote && reads == 0 {
					t.Error("no payload was copied from a peer's memory")
				}
				if !mode.remote && reads != 0 {
					t.Errorf("%d payloads were copied from peers' memory, want none", reads)
				}
			})
		}
	}
}

// allreduceExact sums count elements of type dt over cs's ranks, rank r
// contributing (r+1)*(i%7) at i, and checks every element of every rank's
// result.
func allreduceExact(t *testing.T, cs []*collective.Comm, dt kernels.DType, count int) {
	t.Helper()
	n, esz := len(cs), elemSize(dt)
	bufs := make([][]byte, n)
	for r := range n {
		bufs[r] = make([]byte, count*esz)
		fillPeriodic(dt, bufs[r], func(i int) float64 { return float64((r + 1) * (i % 7)) })
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { errs[r] = cs[r].Allreduce(ctx, dt, bufs[r], kernels.Sum, collective.ReduceOptions{}) })
	}
	wg.Wait()
	want := make([]byte, count*esz)
	fillPeriodic(dt, want, func(i int) float64 { return float64(n * (n + 1) / 2 * (i % 7)) })
	for r := range n {
		if errs[r] != nil {
			t.Fatalf("%v, %d elements: rank %d: %v", dt, count, r, errs[r])
		}
		if string(bufs[r]) != string(want) {
			t.Fatalf("%v, %d elements: rank %d: wrong sum", dt, count, r)
		}
	}
}

// TestShmRemoteSenderEndsWhenPeerGoes: a SendWait whose remote frame the
// peer never reads ends with ErrPeerGone once the peer closes (it does
// not wait for ever), and a receiver whose sender withdrew its frame
// (its link failed while it waited) fails instead of delivering it.
func TestShmRemoteSenderEndsWhenPeerGoes(t *testing.T) {
	m := meshTuned(t, 2, Config{}, tuning{remoteMin: shm.RemoteFloor})
	blockedUntilPeerCloses(t, m, "SendWait", func() error {
		return m[0].Conn(1).(collective.Rendezvous).SendWait(t.Context(), collective.Tag{Seq: 1}, make([]byte, 2*shm.RemoteFloor))
	})
}

// TestShmRemoteReceiverFailsOnWithdrawnFrame: a sender whose wait for
// the receiver is cut short by its context withdraws the frame, and the
// receiver that comes to it later fails with ErrPeerGone instead of
// copying a buffer its owner may already be reusing.
func TestShmRemoteReceiverFailsOnWithdrawnFrame(t *testing.T) {
	m := meshTuned(t, 2, Config{}, tuning{remoteMin: shm.RemoteFloor})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err := m[0].Conn(1).(collective.Rendezvous).SendWait(ctx, collective.Tag{Seq: 1}, make([]byte, 2*shm.RemoteFloor))
	if err == nil {
		t.Fatal("SendWait with no reader and a 50ms context returned nil")
	}
	buf := make([]byte, 2*shm.RemoteFloor)
	err = m[1].Conn(0).Recv(t.Context(), collective.Tag{Seq: 1}, buf)
	if !errors.Is(err, collective.ErrPeerGone) {
		t.Errorf("Recv of a withdrawn frame = %v, want ErrPeerGone", err)
	}
}

// fillPeriodic fills buf, elements of type dt, with v(i) at i, where v
// repeats every 7 elements: it stores the first period and doubles it by
// copying (64 MiB element by element takes seconds under the race
// detector).
func fillPeriodic(dt kernels.DType, buf []byte, v func(i int) float64) {
	esz := elemSize(dt)
	count := len(buf) / esz
	for i := range min(count, 7) {
		putElem(dt, buf, i, v(i))
	}
	for done := 7 * esz; done < len(buf); done *= 2 {
		copy(buf[done:], buf[:done])
	}
}

// TestShmRemoteAllreduce64MiB all-reduces 64 MiB a rank (and an odd tail
// of three elements), float32, among 2, 3 and 4 ranks, with remote frames
// on and with every receiver refusing them (the fallback through the
// rings): both must give the exact sums, and only the first may have
// copied from a peer's memory.
func TestShmRemoteAllreduce64MiB(t *testing.T) {
	const count = 64<<20/4 + 3
	for _, n := range []int{2, 3, 4} {
		for _, refuse := range []bool{false, true} {
			t.Run(fmt.Sprintf("n%d/refused=%v", n, refuse), func(t *testing.T) {
				m := meshTuned(t, n, Config{}, tuning{remoteMin: shm.RemoteFloor, refuseRemote: refuse})
				cs := make([]*collective.Comm, n)
				for r := range n {
					cs[r] = collective.NewComm(m[r], collective.Options{})
				}
				allreduceExact(t, cs, kernels.F32, count)
				reads := int64(0)
				for _, tr := range m {
					reads += remoteReads(tr)
				}
				if !refuse && reads == 0 {
					t.Error("no payload was copied from a peer's memory")
				}
				if refuse && reads != 0 {
					t.Errorf("%d payloads were copied from peers' memory, want none", reads)
				}
			})
		}
	}
}
