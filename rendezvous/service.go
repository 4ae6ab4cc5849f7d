package rendezvous

import (
	"errors"
	"fmt"
	"time"
)

// service holds the RPC methods that gorpc's Dispatcher exposes as
// "Rendezvous.<Method>". Every exported method here is part of the wire
// protocol; helpers live on Server.
type service struct{ s *Server }

// Register records a rank's host and data-plane address.
func (v *service) Register(remote string, r *registerReq) error {
	if err := v.s.enter(); err != nil {
		return err
	}
	defer v.s.handlers.Leave()
	fresh, complete, round, err := v.s.board.register(Peer{Rank: r.Rank, Host: r.Host, Addr: r.Addr, Machine: r.Machine})
	switch {
	case errors.Is(err, ErrStopped):
		v.s.log.Debug("rendezvous: registration for a later round refused", "rank", r.Rank, "remote", remote)
		return err
	case err != nil:
		v.s.log.Warn("rendezvous: registration refused", "rank", r.Rank, "remote", remote, "err", err)
		return err
	}
	if fresh {
		v.s.log.Debug("rendezvous: rank registered", "rank", r.Rank, "host", r.Host, "addr", r.Addr, "round", round, "remote", remote)
	}
	if complete {
		v.s.log.Info("rendezvous: all ranks registered", "size", v.s.cfg.Size, "round", round)
	}
	return nil
}

// Leave withdraws a rank's registration at r.Addr: its runtime shut down
// or gave up joining, and its next registration may start a new round.
func (v *service) Leave(remote string, r *registerReq) error {
	if err := v.s.enter(); err != nil {
		return err
	}
	defer v.s.handlers.Leave()
	left, err := v.s.board.leave(r.Rank, r.Addr)
	if left {
		v.s.log.Debug("rendezvous: rank left", "rank", r.Rank, "addr", r.Addr, "remote", remote)
	}
	return err
}

// PeerTable answers the table of the round that the caller's registration
// (r.Rank at r.Addr) belongs to, or of the current round for a caller
// that sends no address, waiting up to r.Wait (at most MaxWait) for the
// round's last registrations; Ready is false if they did not come.
func (v *service) PeerTable(r *waitReq) (*tableResp, error) {
	if err := v.s.enter(); err != nil {
		return nil, err
	}
	defer v.s.handlers.Leave()
	var peers []Peer
	ready, err := v.s.await(r.Wait, func() bool {
		var ok bool
		peers, ok = v.s.board.tableLocked(r.Rank, r.Addr)
		return ok
	})
	if err != nil {
		return nil, err
	}
	return &tableResp{Ready: ready, Peers: peers}, nil
}

// Missing lists the ranks not registered yet, with their planned hosts.
func (v *service) Missing() (*missingResp, error) {
	if err := v.s.enter(); err != nil {
		return nil, err
	}
	defer v.s.handlers.Leave()
	return &missingResp{Missing: v.s.board.missing()}, nil
}

// Set stores a value in the key-value store.
func (v *service) Set(r *setReq) error {
	if err := v.s.enter(); err != nil {
		return err
	}
	defer v.s.handlers.Leave()
	if err := checkKey(r.Key); err != nil {
		return err
	}
	if len(r.Value) > MaxValueLen {
		return fmt.Errorf("%w: value of %d bytes for key %q exceeds %d", ErrBadRequest, len(r.Value), r.Key, MaxValueLen)
	}
	return v.s.board.set(r.Key, r.Value)
}

// Get answers the value of r.Key, waiting up to r.Wait (at most MaxWait)
// for it to be set; Found is false if it was not.
func (v *service) Get(r *waitReq) (*getResp, error) {
	if err := v.s.enter(); err != nil {
		return nil, err
	}
	defer v.s.handlers.Leave()
	if err := checkKey(r.Key); err != nil {
		return nil, err
	}
	var val []byte
	found, err := v.s.await(r.Wait, func() bool {
		var ok bool
		val, ok = v.s.board.getLocked(r.Key)
		return ok
	})
	if err != nil {
		return nil, err
	}
	return &getResp{Found: found, Value: val}, nil
}

// Ping is the heartbeat: it fails only once the job is aborted.
func (v *service) Ping() error {
	if err := v.s.enter(); err != nil {
		return err
	}
	defer v.s.handlers.Leave()
	_, _, err := v.s.board.check(func() bool { return true })
	return err
}

// enter admits a service call unless the server is stopping; the caller
// must defer s.handlers.Leave() on success.
func (s *Server) enter() error {
	if !s.handlers.Enter() {
		return fmt.Errorf("%w: shutting down", ErrStopped)
	}
	s.calls.Add(1)
	return nil
}

// await re-evaluates cond (under the board lock) on every change until it
// holds, wait (capped at MaxWait) passes, the job aborts or the server
// stops. It reports whether cond held.
func (s *Server) await(wait time.Duration, cond func() bool) (bool, error) {
	timer := time.NewTimer(min(max(wait, 0), MaxWait))
	defer timer.Stop()
	for {
		ok, changed, err := s.board.check(cond)
		if ok || err != nil {
			return ok, err
		}
		select {
		case <-changed:
		case <-timer.C:
			return false, nil
		case <-s.stopping:
			return false, fmt.Errorf("%w: shutting down", ErrStopped)
		}
	}
}

// checkKey validates a key-value store key.
func checkKey(key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return fmt.Errorf("%w: key of %d bytes, want 1 to %d", ErrBadRequest, len(key), MaxKeyLen)
	}
	return nil
}
