// Package metricpush sends a process's metric points to gorun's
// rendezvous (rendezvous.Client.PushMetrics) the way hvd.LogScalars does,
// for the processes that have no hvd runtime: the parameter-server tasks
// (package ps) and the sidecar evaluator (package evaluator). Log never
// blocks: points wait in a bounded buffer that a goroutine sends every
// Interval (sooner when it is half full) and once more at Close; what
// finds the buffer full, fails to send or finds nobody listening is
// dropped and counted.
package metricpush

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorovod/gorovod/rendezvous"
)

// Bounds of a Pusher.
const (
	// Buffer is how many points wait for the next send at most.
	Buffer = 8192
	// Interval is how often the buffered points are sent.
	Interval = 250 * time.Millisecond
	// sendTimeout bounds one send, and so what Close adds for the last.
	sendTimeout = time.Second
)

// Pusher buffers the points of one process (one rank number in gorun's
// Store) and sends them. A nil *Pusher drops nothing and does nothing.
type Pusher struct {
	c       *rendezvous.Client
	rank    int
	log     *slog.Logger
	dropped atomic.Int64
	deaf    atomic.Bool

	mu  sync.Mutex
	buf []rendezvous.MetricPoint

	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	stopped sync.Once
}

// New starts a Pusher that sends the points of rank through c (nil: every
// point is dropped and counted). log may be nil.
func New(c *rendezvous.Client, rank int, log *slog.Logger) *Pusher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pusher{c: c, rank: rank, log: log, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if c == nil {
		p.deaf.Store(true)
		close(p.done)
		return p
	}
	go p.run()
	return p
}

// Log buffers scalars of step as the points of the training code's
// series (Runtime false) and returns at once.
func (p *Pusher) Log(step int64, scalars map[string]float64) {
	if p == nil {
		return
	}
	t := time.Now().UnixNano()
	p.add(len(scalars), func(buf []rendezvous.MetricPoint) []rendezvous.MetricPoint {
		for name, v := range scalars {
			if len(buf) == Buffer {
				break
			}
			buf = append(buf, rendezvous.MetricPoint{Step: step, Time: t, Name: name, Value: v})
		}
		return buf
	})
}

// Add buffers points as they are (a zero Time is now) and returns at once.
func (p *Pusher) Add(points ...rendezvous.MetricPoint) {
	if p == nil {
		return
	}
	t := time.Now().UnixNano()
	p.add(len(points), func(buf []rendezvous.MetricPoint) []rendezvous.MetricPoint {
		for _, pt := range points {
			if len(buf) == Buffer {
				break
			}
			if pt.Time == 0 {
				pt.Time = t
			}
			buf = append(buf, pt)
		}
		return buf
	})
}

// add appends n points with fill, counting those that do not fit.
func (p *Pusher) add(n int, fill func([]rendezvous.MetricPoint) []rendezvous.MetricPoint) {
	if p.deaf.Load() {
		p.dropped.Add(int64(n))
		return
	}
	p.mu.Lock()
	before := len(p.buf)
	p.buf = fill(p.buf)
	kept := len(p.buf) - before
	early := len(p.buf) >= Buffer/2
	p.mu.Unlock()
	if kept < n {
		p.dropped.Add(int64(n - kept))
	}
	if early {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// Dropped counts the points dropped so far.
func (p *Pusher) Dropped() int64 {
	if p == nil {
		return 0
	}
	return p.dropped.Load()
}

// Close sends what is left (bounded by about a second) and stops.
func (p *Pusher) Close() {
	if p == nil {
		return
	}
	p.stopped.Do(func() { close(p.stop) })
	<-p.done
}

func (p *Pusher) run() {
	defer close(p.done)
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-p.kick:
		case <-p.stop:
			p.flush()
			return
		}
		p.flush()
	}
}

// flush sends the buffered points in calls of at most
// rendezvous.MaxMetricPoints.
func (p *Pusher) flush() {
	p.mu.Lock()
	batch := p.buf
	p.buf = nil
	p.mu.Unlock()
	for len(batch) > 0 {
		if p.deaf.Load() {
			p.dropped.Add(int64(len(batch)))
			return
		}
		n := min(len(batch), rendezvous.MaxMetricPoints)
		ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
		err := p.c.PushMetrics(ctx, p.rank, batch[:n])
		cancel()
		if err != nil {
			p.dropped.Add(int64(len(batch)))
			if errors.Is(err, rendezvous.ErrNoMetrics) || errors.Is(err, rendezvous.ErrClosed) {
				p.deaf.Store(true)
			}
			p.log.Debug("metrics not sent", "points", len(batch), "err", err)
			return
		}
		batch = batch[n:]
	}
}
