package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/valyala/gorpc"
)

// pollWait is how long one blocking call (PeerTable, Get) may be held by
// the server; clients ask again until their context ends, so the wait is
// bounded where it happens and a dead server is noticed quickly.
const pollWait = 500 * time.Millisecond

// call makes one attempt of method, bounded by timeout, ctx and Close. The
// gorpc call runs in a goroutine admitted by the client's gate, so ctx and
// Close interrupt the caller at once; the goroutine itself ends within
// timeout. ctx errors come back unwrapped; others wrap a sentinel.
func (c *Client) call(ctx context.Context, method string, req any, timeout time.Duration) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 { // the deadline has passed; let ctx say so
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if !c.gate.Enter() {
		return nil, ErrClosed
	}
	type result struct {
		resp any
		err  error
	}
	ch := make(chan result, 1)
	go func() { // "rendezvous-call"
		defer c.gate.Leave()
		resp, err := c.dc.CallTimeout(method, req, timeout)
		ch <- result{resp, err}
	}()
	select {
	case r := <-ch:
		return r.resp, c.mapErr(method, r.err)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.life.Done():
		return nil, ErrClosed
	}
}

// mapErr turns a gorpc error into one of this package's: a handler's
// error becomes its sentinel again; timeouts and broken connections
// become ErrUnreachable, quoting the last connection failure.
func (c *Client) mapErr(method string, err error) error {
	if err == nil {
		return nil
	}
	if c.life.Err() != nil {
		return ErrClosed
	}
	var ce *gorpc.ClientError
	if errors.As(err, &ce) && ce.Server {
		return decodeRemote(ce.Error())
	}
	if last := c.link.lastError(); last != nil {
		return fmt.Errorf("%w: %s: %w (last connection error: %w)", ErrUnreachable, method, err, last)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnreachable, method, err)
}

// retry repeats attempt while the server is unreachable or stopping (a
// successor may take its address), until it succeeds, fails for another
// reason, or ctx ends. Attempts that fail fast are spaced minRedial apart.
func (c *Client) retry(ctx context.Context, op string, attempt func() error) error {
	var last error
	for {
		start := time.Now()
		err := attempt()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil && last != nil:
			return fmt.Errorf("%w; %s gave up: %w", last, op, ctx.Err())
		case ctx.Err() != nil:
			return fmt.Errorf("rendezvous: %s: %w", op, ctx.Err())
		case !errors.Is(err, ErrUnreachable) && !errors.Is(err, ErrStopped):
			return err
		}
		last = err
		if err := c.sleep(ctx, minRedial-time.Since(start)); err != nil {
			return fmt.Errorf("%w; %s gave up: %w", last, op, err)
		}
	}
}

// poll repeats a blocking call (req, held up to pollWait by the server)
// until done accepts a response, ctx ends, or an error other than an
// unreachable server occurs. When ctx ends it returns ctx's error, and the
// last unreachable error seen (if any) as unreachable.
func (c *Client) poll(ctx context.Context, method string, req waitReq, done func(any) bool) (unreachable, err error) {
	for {
		wait := pollWait
		if dl, ok := ctx.Deadline(); ok {
			wait = max(min(wait, time.Until(dl)), 0)
		}
		start := time.Now()
		r := req // a fresh request each time: an abandoned call may still hold the last one
		r.Wait = wait
		resp, err := c.call(ctx, method, &r, wait+c.opts.callTimeout)
		switch {
		case err == nil && done(resp):
			return nil, nil
		case ctx.Err() != nil:
			return unreachable, ctx.Err()
		case err != nil && !errors.Is(err, ErrUnreachable):
			return unreachable, err
		case err != nil:
			unreachable = err
			if err := c.sleep(ctx, minRedial-time.Since(start)); err != nil {
				return unreachable, err
			}
		}
	}
}

// sleep waits d (if positive), returning early with ctx's error or
// ErrClosed.
func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.life.Done():
		return ErrClosed
	}
}
