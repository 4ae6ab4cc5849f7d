// Command tcpexchange measures what plain TCP moves between two hosts when
// both send at once, as a two-rank all-reduce does: each sample, both
// processes write the same number of bytes to each other and read the
// other's, over K sockets per direction, with no reduction and no framing.
// A two-rank ring all-reduce moves exactly these bytes each way (in two
// halves), so this is those bytes moved plainly, with a goroutine per
// socket and Go's blocking calls; run with several K it shows whether more
// sockets per direction move them faster. lab_bench.sh's "tcpx" peers run
// it.
//
// Rank 0 listens on -addr, rank 1 dials it:
//
//	tcpexchange -rank 0 -addr 10.0.0.1:7070 -streams 2 -s 262144,1048576
//	tcpexchange -rank 1 -addr 10.0.0.1:7070 -streams 2 -s 262144,1048576
//
// -congestion sets the data sockets' congestion control on both ends
// (lab_bench.sh passes Reno, as gorovod's links between hosts have).
//
// Rank 0 prints allreduce_bench's RESULT lines (label, 2, bytes, samples,
// calls per sample, median, min and mean seconds, algbw and busbw in GB/s,
// "ok"), with the same warm-up and sample plan, then "# done". A sample's
// time is the slower rank's. busbw equals algbw at two ranks.
//
// The connections are the control one (barriers, the samples' times) and
// then K per direction, each opened with an 8-byte greeting: a magic word
// and the connection's index. Anything else is refused and the run fails;
// -timeout bounds the whole run.
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorovod/gorovod/internal/tcpopt"
)

// magic opens every connection's greeting.
const magic = 0x67727678 // "grvx"

type config struct {
	rank       int
	addr       string
	streams    int
	sizes      []int
	budget     float64
	warmBudget float64
	label      string
	congestion string
	timeout    time.Duration
}

func main() {
	cfg, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "tcpexchange:", err)
		os.Exit(2)
	}
	// The whole run is bounded: a peer that never comes, or stops
	// mid-sample, ends it with an error.
	done := make(chan error, 1)
	go func() { done <- run(cfg, os.Stdout) }()
	select {
	case err = <-done:
	case <-time.After(cfg.timeout):
		err = fmt.Errorf("no result within -timeout %v", cfg.timeout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tcpexchange:", err)
		os.Exit(1)
	}
}

func parse(args []string) (config, error) {
	fs := flag.NewFlagSet("tcpexchange", flag.ContinueOnError)
	var cfg config
	var sizes string
	fs.IntVar(&cfg.rank, "rank", -1, "0 (listens on -addr) or 1 (dials it)")
	fs.StringVar(&cfg.addr, "addr", "", "host:port of rank 0")
	fs.IntVar(&cfg.streams, "streams", 1, "sockets per direction (1-16)")
	fs.StringVar(&sizes, "s", "1048576", "bytes each way per exchange, comma separated")
	fs.Float64Var(&cfg.budget, "b", 1.5, "seconds of samples per size (soft; never fewer than 3)")
	fs.Float64Var(&cfg.warmBudget, "w", 0.5, "seconds of warm-up per size (soft; at least 1)")
	fs.StringVar(&cfg.label, "l", "", "label of the RESULT lines (default tcpx<streams>)")
	fs.StringVar(&cfg.congestion, "congestion", "", "congestion control of the data sockets (Linux's name; empty: the host's default)")
	fs.DurationVar(&cfg.timeout, "timeout", 5*time.Minute, "limit of the whole run")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	switch {
	case fs.NArg() > 0:
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case cfg.rank != 0 && cfg.rank != 1:
		return cfg, errors.New("-rank must be 0 or 1")
	case cfg.addr == "":
		return cfg, errors.New("-addr is required")
	case cfg.streams < 1 || cfg.streams > 16:
		return cfg, fmt.Errorf("-streams %d: want 1-16", cfg.streams)
	case cfg.timeout <= 0:
		return cfg, errors.New("-timeout must be positive")
	}
	for f := range strings.SplitSeq(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1<<30 {
			return cfg, fmt.Errorf("bad size %q (want 1 to 2^30 bytes)", f)
		}
		cfg.sizes = append(cfg.sizes, n)
	}
	if cfg.label == "" {
		cfg.label = "tcpx" + strconv.Itoa(cfg.streams)
	}
	return cfg, nil
}

// pair is rank's connections to the other rank.
type pair struct {
	ctl net.Conn   // barriers and times, both ways
	out []net.Conn // this rank's data to the other, one part each
	in  []net.Conn // the other's data, one part each
}

// connect opens (rank 1) or accepts (rank 0) the control connection and
// K data connections each way. Connection i of rank 1's dials is the
// control one for i = 0, then rank 1's sending ones, then its receiving
// ones.
func connect(cfg config) (*pair, error) {
	total := 1 + 2*cfg.streams
	conns := make([]net.Conn, total)
	if cfg.rank == 1 {
		for i := range total {
			c, err := dialRetry(cfg.addr, cfg.timeout)
			if err != nil {
				return nil, err
			}
			var g [8]byte
			binary.BigEndian.PutUint32(g[:4], magic)
			binary.BigEndian.PutUint32(g[4:], uint32(i))
			if _, err := c.Write(g[:]); err != nil {
				return nil, err
			}
			conns[i] = c
		}
	} else {
		ln, err := net.Listen("tcp", cfg.addr)
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		for got := 0; got < total; {
			c, err := ln.Accept()
			if err != nil {
				return nil, err
			}
			i, err := greeting(c, total)
			if err == nil && conns[i] != nil {
				err = fmt.Errorf("index %d again", i)
			}
			if err != nil {
				c.Close()
				return nil, fmt.Errorf("refused a connection from %v: %w", c.RemoteAddr(), err)
			}
			conns[i] = c
			got++
		}
	}
	for i, c := range conns {
		tc, ok := c.(*net.TCPConn)
		if !ok {
			continue
		}
		_ = tc.SetNoDelay(true)
		if i > 0 && cfg.congestion != "" {
			if err := tcpopt.SetCongestion(tc, cfg.congestion); err != nil {
				return nil, fmt.Errorf("congestion control %q: %w", cfg.congestion, err)
			}
		}
	}
	p := &pair{ctl: conns[0]}
	sending, receiving := conns[1:1+cfg.streams], conns[1+cfg.streams:]
	if cfg.rank == 0 {
		sending, receiving = receiving, sending
	}
	p.out, p.in = sending, receiving
	return p, nil
}

// greeting reads a dialer's 8 bytes within 10 s and returns its index.
func greeting(c net.Conn, total int) (int, error) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var g [8]byte
	if _, err := io.ReadFull(c, g[:]); err != nil {
		return 0, err
	}
	_ = c.SetReadDeadline(time.Time{})
	i := int(binary.BigEndian.Uint32(g[4:]))
	if binary.BigEndian.Uint32(g[:4]) != magic || i >= total {
		return 0, fmt.Errorf("bad greeting %x", g)
	}
	return i, nil
}

// dialRetry dials addr until it answers or limit passes: rank 0 may not
// be listening yet.
func dialRetry(addr string, limit time.Duration) (net.Conn, error) {
	end := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err == nil || time.Now().After(end) {
			return c, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// exchange writes out to the other rank and reads as many bytes into in,
// each split over the K sockets of its direction, one goroutine per
// socket and direction.
func (p *pair) exchange(out, in []byte) error {
	k := len(p.out)
	part := (len(out) + k - 1) / k
	errs := make(chan error, 2*k)
	var wg sync.WaitGroup
	for j := range k {
		lo, hi := min(j*part, len(out)), min((j+1)*part, len(out))
		wg.Go(func() {
			_, err := p.out[j].Write(out[lo:hi])
			errs <- err
		})
		wg.Go(func() {
			_, err := io.ReadFull(p.in[j], in[lo:hi])
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// barrier waits until both ranks reach it: one byte each way on the
// control connection.
func (p *pair) barrier() error {
	if _, err := p.ctl.Write([]byte{1}); err != nil {
		return err
	}
	var b [1]byte
	_, err := io.ReadFull(p.ctl, b[:])
	return err
}

// agree sends this rank's wish to go on and returns whether both wish so.
func (p *pair) agree(more bool) (bool, error) {
	b := [1]byte{0}
	if more {
		b[0] = 1
	}
	if _, err := p.ctl.Write(b[:]); err != nil {
		return false, err
	}
	var o [1]byte
	if _, err := io.ReadFull(p.ctl, o[:]); err != nil {
		return false, err
	}
	return more && o[0] == 1, nil
}

// plan is allreduce_bench's (and the peers'): warm-up calls, most samples
// and calls per sample for a size.
func plan(n int) (warm, iters, k int) {
	switch {
	case n <= 16<<10:
		return 200, 200, 20
	case n <= 256<<10:
		return 50, 100, 5
	case n <= 4<<20:
		return 10, 50, 1
	case n <= 32<<20:
		return 3, 20, 1
	case n <= 128<<20:
		return 2, 10, 1
	}
	return 1, 5, 1
}

func run(cfg config, stdout io.Writer) error {
	p, err := connect(cfg)
	if err != nil {
		return err
	}
	if cfg.rank == 0 {
		fmt.Fprintf(stdout, "# tcpexchange: 2 ranks, %d socket(s) per direction, both ways at once\n", cfg.streams)
	}
	for _, n := range cfg.sizes {
		line, err := measure(p, cfg, n)
		if err != nil {
			return fmt.Errorf("size %d: %w", n, err)
		}
		if cfg.rank == 0 {
			fmt.Fprintln(stdout, line)
		}
	}
	if err := p.barrier(); err != nil {
		return err
	}
	if cfg.rank == 0 {
		fmt.Fprintln(stdout, "# done")
	}
	return nil
}

// measure runs one size: warm-up, then samples of k exchanges after a
// barrier, each sample the slower rank's; it returns the RESULT line.
func measure(p *pair, cfg config, n int) (string, error) {
	out, in := make([]byte, n), make([]byte, n)
	for i := range out {
		out[i] = byte(i*7 + cfg.rank)
	}
	warm, iters, k := plan(n)
	start := time.Now()
	for w := 0; ; w++ {
		ok, err := p.agree(w < warm && (w < 1 || time.Since(start).Seconds() < cfg.warmBudget))
		if err != nil {
			return "", err
		}
		if !ok {
			break
		}
		if err := p.exchange(out, in); err != nil {
			return "", err
		}
	}
	var samples []float64
	start = time.Now()
	for {
		ok, err := p.agree(len(samples) < iters && (len(samples) < 3 || time.Since(start).Seconds() < cfg.budget))
		if err != nil {
			return "", err
		}
		if !ok {
			break
		}
		if err := p.barrier(); err != nil {
			return "", err
		}
		t0 := time.Now()
		for range k {
			if err := p.exchange(out, in); err != nil {
				return "", err
			}
		}
		samples = append(samples, time.Since(t0).Seconds()/float64(k))
	}
	// The bytes that came are the other rank's pattern.
	for i := range in {
		if in[i] != byte(i*7+1-cfg.rank) {
			return "", fmt.Errorf("byte %d arrived as %#x, want %#x", i, in[i], byte(i*7+1-cfg.rank))
		}
	}
	if err := slowest(p, samples); err != nil {
		return "", err
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	med := sorted[len(sorted)/2]
	if len(sorted)%2 == 0 {
		med = (sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2
	}
	var sum float64
	for _, s := range samples {
		sum += s
	}
	bw := float64(n) / med / 1e9
	return fmt.Sprintf("RESULT,%s,2,%d,%d,%d,%.9f,%.9f,%.9f,%.4f,%.4f,ok",
		cfg.label, n, len(samples), k, med, sorted[0], sum/float64(len(samples)), bw, bw), nil
}

// slowest replaces each sample with the larger of the two ranks' (the
// ranks took the same number; each sends its own and reads the other's).
func slowest(p *pair, samples []float64) error {
	b := make([]byte, 8*len(samples))
	for i, s := range samples {
		binary.BigEndian.PutUint64(b[8*i:], math.Float64bits(s))
	}
	errc := make(chan error, 1)
	go func() {
		_, err := p.ctl.Write(b)
		errc <- err
	}()
	o := make([]byte, len(b))
	if _, err := io.ReadFull(p.ctl, o); err != nil {
		return err
	}
	if err := <-errc; err != nil {
		return err
	}
	for i := range samples {
		samples[i] = max(samples[i], math.Float64frombits(binary.BigEndian.Uint64(o[8*i:])))
	}
	return nil
}
