package tcptransport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/kernels"
)

// exchanger returns rank r's link to peer as a collective.Exchanger.
func exchanger(t *testing.T, m []collective.Transport, r, peer int) collective.Exchanger {
	t.Helper()
	ex, ok := m[r].Conn(peer).(collective.Exchanger)
	if !ok {
		t.Fatalf("rank %d's link to %d is no Exchanger", r, peer)
	}
	return ex
}

// fill returns n bytes that depend on id and on their position.
func fill(id, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + id*31 + i>>9)
	}
	return p
}

// TestExchangeRing has every rank of a TCP ring send to its right while
// it receives from its left in one Exchange, with messages far beyond
// what the sockets buffer (so that each must move while the other does),
// and empty ones; it checks every byte and what arrived was told. Small
// exchanges run with polling as shipped and with a budget far beyond any
// wait here.
// Messages also go gathered from and scattered into pieces, of uneven
// sizes and some empty, more than one writev takes (maxIov), cut
// differently on the two sides.
func TestExchangeRing(t *testing.T) {
	for _, n := range []int{2, 3} {
		for _, size := range []int{0, 1, 100 << 10, 8 << 20} {
			for _, spin := range []time.Duration{0, time.Hour} {
				t.Run(fmt.Sprintf("n%d/%d/spin=%v", n, size, spin), func(t *testing.T) {
					exchangeRing(t, n, size, spin, 0, 1)
				})
			}
		}
	}
	for _, size := range []int{0, 5, 100 << 10, 8 << 20} {
		t.Run(fmt.Sprintf("pieces/n3/%d", size), func(t *testing.T) {
			exchangeRing(t, 3, size, 0, 0, 3*maxIov/2)
		})
	}
	// Large exchanges that poll (tuning.largeLook), for a budget far
	// beyond any wait here.
	for _, size := range []int{100 << 10, 8 << 20} {
		t.Run(fmt.Sprintf("pollLarge/n2/%d", size), func(t *testing.T) {
			exchangeRing(t, 2, size, -time.Hour, 0, 1)
		})
	}
	// Exchanges that nap (tcpNap) before they park, without polling and
	// after polling small messages, in pieces too.
	for _, n := range []int{2, 3} {
		for _, size := range []int{1, 100 << 10, 8 << 20} {
			t.Run(fmt.Sprintf("nap/n%d/%d", n, size), func(t *testing.T) {
				exchangeRing(t, n, size, -1, tcpNap, 1)
				exchangeRing(t, n, size, time.Millisecond, tcpNap, 3*maxIov/2)
			})
		}
	}
}

// TestLargeLook: exchanges beyond pollMax poll only where the rank knows
// that polling takes no processor another rank needs: all ranks on this
// host, one processor each; or every rank's machine known and a
// processor to spare on this one; both for exchangeLook. Not with as many ranks as
// processors on this machine across hosts, nor more on this host or
// machine; not across hosts whose machines are unknown, wholly or in
// part; not where spin is set by hand.
func TestLargeLook(t *testing.T) {
	addrs := func(hosts ...int) []string {
		var a []string
		for h, n := range hosts {
			for i := range n {
				a = append(a, fmt.Sprintf("10.0.0.%d:%d", h+1, 7000+i))
			}
		}
		return a
	}
	// ones is n hosts of one rank each.
	ones := func(n int) []string { return addrs(slices.Repeat([]int{1}, n)...) }
	same := func(n int) []string { return slices.Repeat([]string{"m"}, n) }
	cpus := runtime.NumCPU()
	// spare is the look of a rank that shares its machine's processors
	// with n ranks in all, on hosts of their own.
	spare := func(n int) time.Duration {
		if n < cpus {
			return exchangeLook
		}
		return 0
	}
	for _, c := range []struct {
		what     string
		tun      tuning
		addrs    []string
		machines []string
		want     time.Duration
	}{
		{"one rank per processor, one host", tuning{}, addrs(cpus), nil, max(tcpLook, exchangeLook)},
		{"more ranks than processors", tuning{}, addrs(cpus + 1), nil, 0},
		{"two hosts, machines unknown", tuning{}, addrs(1, 1), nil, 0},
		{"two hosts, one machine unknown", tuning{}, addrs(1, 1), []string{"m", ""}, 0},
		{"two hosts, one machine", tuning{}, addrs(1, 1), same(2), spare(2)},
		{"two hosts, two machines", tuning{}, addrs(1, 1), []string{"m", "n"}, spare(1)},
		{"as many hosts as processors, one machine", tuning{}, ones(max(cpus, 2)), same(max(cpus, 2)), 0},
		{"more hosts than processors, one machine", tuning{}, ones(cpus + 1), same(cpus + 1), 0},
		{"spin set", tuning{spin: time.Millisecond}, addrs(cpus), nil, 0},
		{"spin set, machines known", tuning{spin: time.Millisecond}, addrs(1, 1), same(2), 0},
	} {
		if got := c.tun.normalize(0, c.addrs, c.machines).largeLook(); got != c.want {
			t.Errorf("%s (%d processors): largeLook %v, want %v", c.what, cpus, got, c.want)
		}
	}
}

// cut splits p into k pieces of uneven sizes, some of them empty (k > 1),
// with its own pattern for each seed.
func cut(p []byte, k, seed int) [][]byte {
	if k == 1 {
		return [][]byte{p}
	}
	ps := make([][]byte, 0, k)
	for i := range k - 1 {
		w := (i*13 + seed*5) % 7 // 0..6 shares, 0: empty
		n := min(len(p), len(p)*w/(3*k))
		ps = append(ps, p[:n])
		p = p[n:]
	}
	return append(ps, p)
}

// A negative spin is a polling budget of -spin for exchanges of any size
// (tuning.largeLook), which the links must then have; -1 is no polling
// at all. nap, where spin is set, is the links' tuning.nap.
func exchangeRing(t *testing.T, n, size int, spin, nap time.Duration, pieces int) {
	tun := tuning{spin: spin, nap: nap}
	switch {
	case spin == -1:
		tun = tuning{spin: -1, nap: nap}
		spin = 1 // no large look either
	case spin < 0:
		tun = tuning{spin: -1, tcpSpin: -spin, nap: nap}
	}
	m := meshTuned(t, n, Config{NoSharedMemory: true}, tun)
	for r, tr := range m {
		for p := range m {
			if p == r {
				continue
			}
			// With spin 0 the rule decides (TestLargeLook).
			l := tr.(*transport).slots[p].formed.Load().link.(*tcpLink)
			if spin != 0 && l.largeLook != max(-spin, 0) {
				t.Fatalf("rank %d's link to %d: largeLook %v with spin %v", r, p, l.largeLook, spin)
			}
			if spin != 0 && l.r.nap != nap {
				t.Fatalf("rank %d's link to %d: nap %v, want %v", r, p, l.r.nap, nap)
			}
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		right, left := (r+1)%n, (r+n-1)%n
		ex, from := exchanger(t, m, r, right), m[r].Conn(left)
		if !ex.CanExchange(from) {
			t.Fatalf("rank %d cannot exchange over TCP", r)
		}
		wg.Go(func() {
			q, last, calls := make([]byte, size), 0, 0
			se, re := ex.Exchange(ctx, collective.Tag{Seq: 3, Step: uint32(r)}, cut(fill(r, size), pieces, 1),
				from, collective.Tag{Seq: 3, Step: uint32(left)}, cut(q, pieces, 2), func(got int) {
					if got <= last || got > size {
						errs[r] = fmt.Errorf("arrived(%d) after %d, of %d", got, last, size)
					}
					last, calls = got, calls+1
				})
			switch {
			case se != nil || re != nil:
				errs[r] = fmt.Errorf("send: %v, recv: %v", se, re)
			case errs[r] != nil:
			case !bytes.Equal(q, fill(left, size)):
				errs[r] = fmt.Errorf("received bytes differ from what rank %d sent", left)
			case size > 0 && last != size:
				errs[r] = fmt.Errorf("arrived last told %d of %d bytes", last, size)
			case size == 0 && calls != 0:
				errs[r] = fmt.Errorf("arrived called %d times for an empty message", calls)
			}
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestExchangeNotOverSharedMemory: links in shared memory do not
// exchange, so the communicator keeps its other executors for them.
func TestExchangeNotOverSharedMemory(t *testing.T) {
	m := meshT(t, 2, Config{})
	if exchanger(t, m, 0, 1).CanExchange(m[0].Conn(1)) {
		t.Fatal("CanExchange over shared memory")
	}
}

// TestExchangePeerGone: when the left peer goes away during an Exchange
// whose send cannot finish (the right peer does not read), the receive
// names the left peer as gone and the send ends as closed here, blaming
// no one.
func TestExchangePeerGone(t *testing.T) {
	m := meshT(t, 3, Config{NoSharedMemory: true})
	ex, from := exchanger(t, m, 0, 1), m[0].Conn(2)
	done := make(chan [2]error, 1)
	go func() {
		se, re := ex.Exchange(t.Context(), tag11, [][]byte{make([]byte, 32<<20)}, from, tag11, [][]byte{make([]byte, 8<<20)}, nil)
		done <- [2]error{se, re}
	}()
	time.Sleep(20 * time.Millisecond) // usually in the middle by now; either way the result is the same
	m[2].Close()
	var errs [2]error
	select {
	case errs = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Exchange still running 10 s after its peer closed")
	}
	se, re := errs[0], errs[1]
	if !errors.Is(re, collective.ErrPeerGone) || !containsAll(re.Error(), "recv from peer 2") {
		t.Errorf("recv err = %v, want ErrPeerGone from peer 2", re)
	}
	if !errors.Is(se, collective.ErrClosed) || errors.Is(se, collective.ErrPeerGone) {
		t.Errorf("send err = %v, want ErrClosed only", se)
	}
}

// TestExchangeDeadline: an Exchange whose peer neither reads nor writes
// ends with the deadline of its context, reported as a timeout, also
// while it polls for its small message with an hour's budget.
func TestExchangeDeadline(t *testing.T) {
	for _, tun := range []tuning{{}, {spin: time.Hour}, {spin: -1, nap: tcpNap}, {spin: time.Millisecond, nap: 20 * time.Millisecond}} {
		t.Run(fmt.Sprintf("spin=%v/nap=%v", tun.spin, tun.nap), func(t *testing.T) { exchangeDeadline(t, tun) })
	}
}

func exchangeDeadline(t *testing.T, tun tuning) {
	m := meshTuned(t, 2, Config{NoSharedMemory: true}, tun)
	ex, from := exchanger(t, m, 0, 1), m[0].Conn(1)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	se, re := ex.Exchange(ctx, tag11, [][]byte{make([]byte, 32<<20)}, from, tag11, [][]byte{make([]byte, 8)}, nil)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Exchange took %v past a 100 ms deadline", took)
	}
	if !errors.Is(se, collective.ErrTimeout) && !errors.Is(re, collective.ErrTimeout) {
		t.Errorf("send err = %v, recv err = %v, want a timeout", se, re)
	}
	if se == nil || re == nil {
		t.Errorf("send err = %v, recv err = %v, want both to fail", se, re)
	}
}

// TestExchangeCancelledBefore: a context that has ended before the call
// fails both directions without touching the links, which stay usable.
func TestExchangeCancelledBefore(t *testing.T) {
	m := meshT(t, 2, Config{NoSharedMemory: true})
	ex, from := exchanger(t, m, 0, 1), m[0].Conn(1)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	se, re := ex.Exchange(ctx, tag11, [][]byte{make([]byte, 8)}, from, tag11, [][]byte{make([]byte, 8)}, nil)
	if !errors.Is(se, context.Canceled) || !errors.Is(re, context.Canceled) {
		t.Fatalf("send err = %v, recv err = %v, want both cancelled", se, re)
	}
	if err := m[0].Conn(1).Send(t.Context(), tag11, []byte("still up")); err != nil {
		t.Fatalf("Send after the cancelled Exchange: %v", err)
	}
	got := make([]byte, 8)
	if err := m[1].Conn(0).Recv(t.Context(), tag11, got); err != nil || string(got) != "still up" {
		t.Fatalf("Recv = %q, %v", got, err)
	}
}

// TestAllreduceOverTCP runs ring all-reduces, which exchange step by
// step over TCP links, and checks the sums; at n=2, 2^19+1 elements make
// chunks of 4 and 5 segments of 64 Ki elements, so that one step only
// sends and one only receives.
func TestAllreduceOverTCP(t *testing.T) {
	for _, n := range []int{2, 3} {
		for _, count := range []int{9000, 300001, 1<<19 + 1} {
			t.Run(fmt.Sprintf("n%d/%d", n, count), func(t *testing.T) {
				m := meshT(t, n, Config{NoSharedMemory: true})
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				defer cancel()
				errs := make([]error, n)
				var wg sync.WaitGroup
				for r := range n {
					c := collective.NewComm(m[r], collective.Options{SegmentBytes: 256 << 10})
					wg.Go(func() {
						buf := make([]float32, count)
						for i := range buf {
							buf[i] = float32(i%1000 + r)
						}
						for range 3 {
							if err := collective.Allreduce(ctx, c, buf, kernels.Sum, collective.ReduceOptions{}); err != nil {
								errs[r] = err
								return
							}
						}
						// Three sums of n ranks: each element is n^2 times its start summed over ranks.
						for i, v := range buf {
							want := float32(n * n * (n*(i%1000) + n*(n-1)/2))
							if v != want {
								errs[r] = fmt.Errorf("element %d = %v, want %v", i, v, want)
								return
							}
						}
					})
				}
				wg.Wait()
				for r, err := range errs {
					if err != nil {
						t.Errorf("rank %d: %v", r, err)
					}
				}
			})
		}
	}
}

// TestAllreduceVecOverTCP runs fused all-reduces (AllreduceVec) of
// thousands of uneven parts over TCP links, whose segments span more
// parts than one writev takes, and checks that they exchanged step by step
// and equal, bit for bit, the all-reduce of the same values in one buffer.
func TestAllreduceVecOverTCP(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("n%d", n), func(t *testing.T) {
			const count = 300001
			m := meshT(t, n, Config{NoSharedMemory: true})
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			errs, exchanges := make([]error, n), make([]int, n)
			var wg sync.WaitGroup
			for r := range n {
				ct := &countingTransport{Transport: m[r], n: &exchanges[r]}
				c := collective.NewComm(ct, collective.Options{SegmentBytes: 256 << 10})
				wg.Go(func() { errs[r] = allreduceVecMatches(ctx, c, r, count, &exchanges[r]) })
			}
			wg.Wait()
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// allreduceVecMatches all-reduces count float32 values of rank r as one
// buffer, then as parts of 1 to 60 elements, and compares the two; the
// second must have exchanged (counted in exchanges).
func allreduceVecMatches(ctx context.Context, c *collective.Comm, r, count int, exchanges *int) error {
	want := make([]float32, count)
	for i := range want {
		want[i] = float32(i%997)*0.37 + float32(r)*1.1
	}
	whole := kernels.AsBytes(want)
	got := bytes.Clone(whole)
	if err := c.Allreduce(ctx, kernels.F32, whole, kernels.Sum, collective.ReduceOptions{}); err != nil {
		return err
	}
	var parts [][]byte
	for off, k := 0, 0; off < len(got); k++ {
		n := min(len(got)-off, 4*(1+k*7%60))
		parts = append(parts, got[off:off+n])
		off += n
	}
	before := *exchanges
	if err := c.AllreduceVec(ctx, kernels.F32, parts, kernels.Sum, collective.ReduceOptions{}); err != nil {
		return err
	}
	if *exchanges == before {
		return fmt.Errorf("the fused all-reduce of %d parts never called Exchange", len(parts))
	}
	if !bytes.Equal(got, whole) {
		return fmt.Errorf("AllreduceVec of %d parts differs from Allreduce of one buffer", len(parts))
	}
	return nil
}

// countingTransport counts the Exchange calls made on its links.
type countingTransport struct {
	collective.Transport
	n *int
}

func (t *countingTransport) Conn(peer int) collective.Conn {
	return &countingConn{Conn: t.Transport.Conn(peer), n: t.n}
}

type countingConn struct {
	collective.Conn
	n *int
}

func (c *countingConn) CanExchange(from collective.Conn) bool {
	return c.Conn.(collective.Exchanger).CanExchange(from.(*countingConn).Conn)
}

func (c *countingConn) Exchange(ctx context.Context, tag collective.Tag, p [][]byte, from collective.Conn, rtag collective.Tag, q [][]byte, arrived func(n int)) (error, error) {
	*c.n++
	return c.Conn.(collective.Exchanger).Exchange(ctx, tag, p, from.(*countingConn).Conn, rtag, q, arrived)
}
