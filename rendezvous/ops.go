package rendezvous

import (
	"context"
	"fmt"
	"time"
)

// Register announces this rank: its host and the data-plane address peers
// should dial. Registering the same address again is harmless; another
// address for the same rank fails with ErrConflict, unless the rank left
// (Leave) since: then the new address joins the next round of
// registrations, in which every rank forms its mesh anew. Retried while
// the server is unreachable or stopping (a rank-0-hosted rendezvous is
// replaced by the next one at the same address), until ctx ends. The
// client remembers the registration for PeerTable and Leave.
func (c *Client) Register(ctx context.Context, rank int, host, addr string) error {
	return c.RegisterPeer(ctx, Peer{Rank: rank, Host: host, Addr: addr})
}

// RegisterPeer is Register with the whole row this rank gives the peer
// table: also its Machine (at most MaxMachineLen bytes), which the peers
// then find in their tables.
func (c *Client) RegisterPeer(ctx context.Context, p Peer) error {
	req := &registerReq{Rank: p.Rank, Host: p.Host, Addr: p.Addr, Machine: p.Machine}
	err := c.retry(ctx, "Register", func() error {
		_, err := c.call(ctx, "Register", req, c.opts.callTimeout)
		return err
	})
	if err == nil {
		c.mu.Lock()
		c.reg = req
		c.mu.Unlock()
	}
	return err
}

// Leave withdraws this client's registration (its latest Register): the
// rank's runtime has shut down, or gave up joining. The rank's next
// Register, with a new address, then starts or joins the next round if
// its round was complete, or takes its place again in a round still
// forming. Leave makes one attempt, bounded by ctx and the call timeout;
// without a registration it does nothing.
func (c *Client) Leave(ctx context.Context) error {
	c.mu.Lock()
	req := c.reg
	c.reg = nil
	c.mu.Unlock()
	if req == nil {
		return nil
	}
	_, err := c.call(ctx, "Leave", req, c.opts.callTimeout)
	return err
}

// PeerTable waits until every rank has registered in the round of this
// client's registration (the current round for a client that has not
// registered) and returns that round's table, ordered by rank. If ctx ends
// first, the error is a *MissingError naming the ranks that never
// registered and their hosts ("rendezvous: ranks 2 (host b), 3 (host b)
// never registered within 30s"); it matches ErrIncomplete and ctx's
// error. An abort fails it with ErrAborted.
func (c *Client) PeerTable(ctx context.Context) ([]Peer, error) {
	start := time.Now()
	var peers []Peer
	req := waitReq{}
	c.mu.Lock()
	if c.reg != nil {
		req.Rank, req.Addr = c.reg.Rank, c.reg.Addr
	}
	c.mu.Unlock()
	_, err := c.poll(ctx, "PeerTable", req, func(resp any) bool {
		r, ok := resp.(*tableResp)
		if ok && r.Ready {
			peers = r.Peers
		}
		return ok && r.Ready
	})
	switch {
	case err == nil:
		return peers, nil
	case ctx.Err() != nil:
		return nil, c.incomplete(ctx, time.Since(start))
	}
	return nil, err
}

// incomplete builds PeerTable's error after ctx ended: it asks the server
// (briefly, past ctx) which ranks are missing.
func (c *Client) incomplete(ctx context.Context, waited time.Duration) error {
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.callTimeout)
	defer cancel()
	missing, err := c.Missing(mctx)
	switch {
	case err != nil:
		return fmt.Errorf("%w after %s (cannot ask which ranks are missing: %w): %w",
			ErrIncomplete, roundWait(waited), err, ctx.Err())
	case len(missing) == 0:
		return fmt.Errorf("%w: the last rank registered just as the wait ended after %s: %w",
			ErrIncomplete, roundWait(waited), ctx.Err())
	}
	return &MissingError{Missing: missing, Waited: waited, Err: ctx.Err()}
}

// Missing lists the ranks that have not registered yet, with their
// planned hosts (Addr is empty).
func (c *Client) Missing(ctx context.Context) ([]Peer, error) {
	var out []Peer
	err := c.retry(ctx, "Missing", func() error {
		resp, err := c.call(ctx, "Missing", nil, c.opts.callTimeout)
		if r, ok := resp.(*missingResp); ok && err == nil {
			out = r.Missing
		}
		return err
	})
	return out, err
}

// Set stores value under key in the server's key-value store, replacing
// any earlier value, and wakes Get calls waiting for it. Keys are 1 to
// MaxKeyLen bytes, values at most MaxValueLen.
func (c *Client) Set(ctx context.Context, key string, value []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if len(value) > MaxValueLen {
		return fmt.Errorf("%w: value of %d bytes exceeds %d", ErrBadRequest, len(value), MaxValueLen)
	}
	req := &setReq{Key: key, Value: value}
	return c.retry(ctx, "Set", func() error {
		_, err := c.call(ctx, "Set", req, c.opts.callTimeout)
		return err
	})
}

// Get returns the value stored under key, waiting for a Set if there is
// none yet. If ctx ends first the error wraps ErrNotSet and ctx's error.
func (c *Client) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	start := time.Now()
	var val []byte
	unreachable, err := c.poll(ctx, "Get", waitReq{Key: key}, func(resp any) bool {
		r, ok := resp.(*getResp)
		if ok && r.Found {
			val = r.Value
		}
		return ok && r.Found
	})
	switch {
	case err == nil:
		if val == nil {
			val = []byte{}
		}
		return val, nil
	case ctx.Err() != nil && unreachable != nil:
		return nil, fmt.Errorf("%w: key %q after %s: %w (%w)", ErrNotSet, key, roundWait(time.Since(start)), err, unreachable)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%w: key %q after %s: %w", ErrNotSet, key, roundWait(time.Since(start)), err)
	}
	return nil, err
}

// Ping makes one cheap round trip, bounded by ctx and the call timeout. It
// fails with ErrAborted once the launcher aborted the job, and with
// ErrUnreachable if the server does not answer.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.call(ctx, "Ping", nil, c.opts.callTimeout)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("rendezvous: Ping: %w", err)
	}
	return err
}
