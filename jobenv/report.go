package jobenv

import (
	"strconv"
	"strings"
	"time"
)

// This file holds the keys and values of the reports that a failing rank
// leaves in the rendezvous for its launcher: hvd writes them, runner reads
// them to decide which rank to blame.

// FailedBecauseKey is the rendezvous key under which a rank reports that
// its failure was caused by another rank. hvd writes it (best effort,
// within a short timeout) before the failure reaches the program, so the
// report is in place when the rank exits. The value is the decimal rank of
// the peer that went away, PeerGone when the error does not say which,
// PeerShutdown, or SilentBecause's value when peers did not answer in
// time. The launcher (runner.Launch) reads it to choose which failed rank
// to name; any value counts.
func FailedBecauseKey(rank int) string { return "failed-because/" + strconv.Itoa(rank) }

// FailedBecauseKey values besides a peer's rank.
const (
	// PeerGone: a peer went away (its link broke), the error does not say
	// which.
	PeerGone = "peer-gone"
	// PeerShutdown: a peer shut its runtime down while this rank's
	// operations needed it.
	PeerShutdown = "peer-shutdown"
)

// silentPrefix begins a FailedBecauseKey value made by SilentBecause.
const silentPrefix = "silent "

// SilentBecause is the FailedBecauseKey value of a rank that failed because
// the ranks given did not answer it within limit (they are stopped or
// hung): "silent 1,3 2s". A launcher that does not parse it takes it, like
// any value, as a failure caused by a peer.
func SilentBecause(ranks []int, limit time.Duration) string {
	rs := make([]string, len(ranks))
	for i, r := range ranks {
		rs[i] = strconv.Itoa(r)
	}
	return silentPrefix + strings.Join(rs, ",") + " " + limit.String()
}

// ParseSilent reads a SilentBecause value; ok is false for any other.
func ParseSilent(v string) (ranks []int, limit time.Duration, ok bool) {
	f := strings.Fields(strings.TrimPrefix(v, silentPrefix))
	if !strings.HasPrefix(v, silentPrefix) || len(f) != 2 {
		return nil, 0, false
	}
	limit, err := time.ParseDuration(f[1])
	if err != nil {
		return nil, 0, false
	}
	for r := range strings.SplitSeq(f[0], ",") {
		n, err := strconv.Atoi(r)
		if err != nil || n < 0 {
			return nil, 0, false
		}
		ranks = append(ranks, n)
	}
	return ranks, limit, true
}
