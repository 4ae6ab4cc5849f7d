package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Defaults for Watch when its interval or grace is zero: a rank notices a
// vanished launcher within about grace + 2 × interval.
const (
	DefaultWatchInterval = time.Second
	DefaultWatchGrace    = 5 * time.Second
)

// Watch starts a goroutine that pings the server every interval. It calls
// onLost once, and stops, when the server has not answered for longer than
// grace (the error wraps ErrLost) or reports that the job was aborted
// (ErrAborted, with the launcher's reason). This is how a rank notices
// that the launcher died or gave up. Zero interval or grace take the
// defaults. The goroutine ends when ctx ends or the client closes; onLost
// runs after it has left the client's bookkeeping, so onLost may call
// Close. Watch fails only if the client is closed or onLost is nil.
func (c *Client) Watch(ctx context.Context, interval, grace time.Duration, onLost func(error)) error {
	if onLost == nil {
		return fmt.Errorf("%w: Watch needs an onLost function", ErrConfig)
	}
	if interval <= 0 {
		interval = DefaultWatchInterval
	}
	if grace <= 0 {
		grace = DefaultWatchGrace
	}
	if !c.gate.Enter() {
		return ErrClosed
	}
	go func() { // "rendezvous-watch"
		if err := c.watch(ctx, interval, grace); err != nil {
			onLost(err)
		}
	}()
	return nil
}

// watch pings until the server is lost or aborts (returning why), or
// until ctx ends or the client closes (returning nil). It leaves the gate
// before returning, so onLost runs outside it.
func (c *Client) watch(ctx context.Context, interval, grace time.Duration) error {
	defer c.gate.Leave()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	lastOK := time.Now()
	for {
		_, err := c.call(ctx, "Ping", nil, min(c.opts.callTimeout, grace))
		switch {
		case err == nil:
			lastOK = time.Now()
		case errors.Is(err, ErrAborted):
			return err
		case ctx.Err() != nil || errors.Is(err, ErrClosed):
			return nil
		case time.Since(lastOK) > grace:
			return fmt.Errorf("%w: %s did not answer for %s: %w",
				ErrLost, c.addr, roundWait(time.Since(lastOK)), err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil
		case <-c.life.Done():
			return nil
		}
	}
}
