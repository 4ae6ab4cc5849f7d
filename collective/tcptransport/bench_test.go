package tcptransport

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
)

// Benchmarks run on an in-process 2-rank LocalMesh over loopback:
//
//	go test -run '^$' -bench . -benchtime 2s ./collective/tcptransport/
//
// Each compares the shipped settings ("default": autotuned socket buffers,
// 16 KiB read buffer, Reno on loopback) with the alternatives they were
// chosen over: fixed 4 MiB SO_SNDBUF/SO_RCVBUF, no read buffer, a 64 KiB
// read buffer, the host's default congestion control.

// benchVariant is one setting a benchmark measures: a name, a Config and
// the package's tuning.
type benchVariant struct {
	name string
	cfg  Config
	tun  tuning
}

func benchVariants() []benchVariant {
	return []benchVariant{
		{"default", Config{}, tuning{}},
		{"sockbuf=4MiB", Config{}, tuning{sockBuf: 4 << 20}},
		{"readbuf=none", Config{}, tuning{readBuf: -1}},
		{"readbuf=64KiB", Config{}, tuning{readBuf: 64 << 10}},
		{"cc=host", Config{}, tuning{congestion: "-"}},
	}
}

// benchPair forms a 2-rank mesh with v's settings, closed when b ends.
func benchPair(b *testing.B, v benchVariant) (a, z collective.Transport) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := localMesh(ctx, 2, v.cfg, v.tun)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m[0].Close(); m[1].Close() })
	return m[0], m[1]
}

// BenchmarkPingPong measures the round trip of a 4 KiB message: rank 0
// sends, rank 1 echoes. "ctx=cancelable" passes a context that can end,
// which costs a context.AfterFunc per call.
func BenchmarkPingPong(b *testing.B) {
	for _, v := range benchVariants() {
		b.Run(v.name, func(b *testing.B) { pingPong(b, v, context.Background(), 4<<10) })
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.Run("ctx=cancelable", func(b *testing.B) { pingPong(b, benchVariant{}, ctx, 4<<10) })
	b.Run("spin=off", func(b *testing.B) { pingPong(b, benchVariant{tun: tuning{spin: -1}}, context.Background(), 4<<10) })
	b.Run("baseline=raw-tcp", func(b *testing.B) { rawPingPong(b, 4<<10) })
}

// rawPingPong is the floor PingPong is measured against: the same round
// trip over a bare loopback TCP connection, no framing, no handshake.
func rawPingPong(b *testing.B, n int) {
	a, z := rawPair(b)
	done := make(chan error, 1)
	b.ResetTimer()
	go func() { done <- echo(z, n, b.N) }()
	p := make([]byte, n)
	for range b.N {
		if _, err := a.Write(p); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(a, p); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N), "µs/rt")
}

// rawPair returns both ends of a bare loopback TCP connection, closed
// when b ends.
func rawPair(b *testing.B) (a, z net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	if a, err = net.Dial("tcp", ln.Addr().String()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	if z, err = ln.Accept(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { z.Close() })
	return a, z
}

// echo sends back count messages of n bytes read from c.
func echo(c net.Conn, n, count int) error {
	p := make([]byte, n)
	for range count {
		if _, err := io.ReadFull(c, p); err != nil {
			return err
		}
		if _, err := c.Write(p); err != nil {
			return err
		}
	}
	return nil
}

func pingPong(b *testing.B, v benchVariant, ctx context.Context, n int) {
	a, z := benchPair(b, v)
	out, in, echo := make([]byte, n), make([]byte, n), make([]byte, n)
	done := make(chan error, 1)
	b.ResetTimer()
	go func() {
		for i := range b.N {
			tag := collective.Tag{Seq: uint64(i)}
			if err := z.Conn(0).Recv(ctx, tag, echo); err != nil {
				done <- err
				return
			}
			if err := z.Conn(0).Send(ctx, tag, echo); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := range b.N {
		tag := collective.Tag{Seq: uint64(i)}
		if err := a.Conn(1).Send(ctx, tag, out); err != nil {
			b.Fatal(err)
		}
		if err := a.Conn(1).Recv(ctx, tag, in); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N), "µs/rt")
}

// BenchmarkStream measures one-way throughput of 4 MiB frames.
func BenchmarkStream(b *testing.B) {
	for _, v := range benchVariants() {
		b.Run(v.name, func(b *testing.B) {
			a, z := benchPair(b, v)
			b.SetBytes(4 << 20)
			b.ResetTimer()
			stream(b, a, z, 4<<20)
		})
	}
	b.Run("baseline=raw-tcp", func(b *testing.B) {
		a, z := rawPair(b)
		b.SetBytes(4 << 20)
		b.ResetTimer()
		done := make(chan error, 1)
		go func() { done <- drain(z, 4<<20, b.N) }()
		p := make([]byte, 4<<20)
		for range b.N {
			if _, err := a.Write(p); err != nil {
				b.Fatal(err)
			}
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	})
}

// drain reads count messages of n bytes from c.
func drain(c net.Conn, n, count int) error {
	p := make([]byte, n)
	for range count {
		if _, err := io.ReadFull(c, p); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkBidirectional measures throughput with 4 MiB frames flowing
// both ways at once; the bytes counted are those of both directions.
func BenchmarkBidirectional(b *testing.B) {
	for _, v := range benchVariants() {
		b.Run(v.name, func(b *testing.B) {
			a, z := benchPair(b, v)
			b.SetBytes(2 * 4 << 20)
			b.ResetTimer()
			var wg sync.WaitGroup
			wg.Go(func() { stream(b, a, z, 4<<20) })
			wg.Go(func() { stream(b, z, a, 4<<20) })
			wg.Wait()
		})
	}
}

// stream sends b.N frames of n bytes from one rank to another, receiving
// them on a second goroutine, and reports any error with b.Error.
func stream(b *testing.B, from, to collective.Transport, n int) {
	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Go(func() {
		p := make([]byte, n)
		for i := range b.N {
			if err := from.Conn(to.Rank()).Send(ctx, collective.Tag{Seq: uint64(i)}, p); err != nil {
				b.Error(err)
				return
			}
		}
	})
	p := make([]byte, n)
	for i := range b.N {
		if err := to.Conn(from.Rank()).Recv(ctx, collective.Tag{Seq: uint64(i)}, p); err != nil {
			b.Error(err)
			break
		}
	}
	wg.Wait()
}
