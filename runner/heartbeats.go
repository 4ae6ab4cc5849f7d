package runner

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gorovod/gorovod/jobenv"
)

// heartbeats watches the heartbeat counters (AliveKey) of an elastic job's
// members, every jobenv.HeartbeatInterval, and finds those that went silent: a
// counter that stood still for jobenv.HeartbeatLimit (the worker's host is cut
// off, or it hangs), or none sent within the start timeout and that
// limit. Workers are launch indexes; times come in as arguments.
type heartbeats struct {
	read         func(key string) ([]byte, bool) // reads the rendezvous key-value store
	startTimeout time.Duration

	next  time.Time    // when to look next
	beats map[int]beat // by launch index: the last heartbeat seen
}

// beat is the last change seen of a worker's heartbeat counter (at is its
// start time until the first).
type beat struct {
	value string
	at    time.Time
	seen  bool
}

func newHeartbeats(read func(string) ([]byte, bool), startTimeout time.Duration, now time.Time) *heartbeats {
	return &heartbeats{read: read, startTimeout: startTimeout, next: now.Add(jobenv.HeartbeatInterval), beats: map[int]beat{}}
}

// started notes that worker rank started at now.
func (h *heartbeats) started(rank int, now time.Time) { h.beats[rank] = beat{at: now} }

// look reads the counters of members (hostOf gives a worker's host) at
// now, and returns those that went silent, with why; look is next due
// jobenv.HeartbeatInterval later. A host cut off silences all its workers: those
// whose last beat came a little later go with the first, rather than a
// generation later.
func (h *heartbeats) look(members []int, hostOf func(int) string, now time.Time) (silent []int, why error) {
	h.next = now.Add(jobenv.HeartbeatInterval)
	var errs []error
	for _, r := range members {
		b := h.beats[r]
		if v, ok := h.read(jobenv.AliveKey(elasticID(hostOf(r), r))); ok && (!b.seen || string(v) != b.value) {
			h.beats[r] = beat{value: string(v), at: now, seen: true}
			continue
		}
		limit := jobenv.HeartbeatLimit
		if !b.seen {
			limit += h.startTimeout
		}
		if now.Sub(b.at) >= limit {
			silent = append(silent, r)
			hint := ""
			if !b.seen {
				hint = " since it started (does the program train through hvd.RunElastic?)"
			}
			errs = append(errs, fmt.Errorf("runner: rank %d on %s sent no sign of life for %v%s", r, hostOf(r), now.Sub(b.at).Round(time.Second), hint))
		}
	}
	if len(silent) == 0 {
		return nil, nil
	}
	for _, r := range members {
		host, b := hostOf(r), h.beats[r]
		if !slices.Contains(silent, r) && b.seen && now.Sub(b.at) >= 2*jobenv.HeartbeatInterval &&
			slices.ContainsFunc(silent, func(x int) bool { return hostOf(x) == host }) {
			silent = append(silent, r)
			errs = append(errs, fmt.Errorf("runner: rank %d on %s sent no sign of life for %v either", r, host, now.Sub(b.at).Round(100*time.Millisecond)))
		}
	}
	return silent, errors.Join(errs...)
}
