package tcptransport

import (
	"fmt"
)

// The hellos each side binds into its handshake proof. The accepting side
// states who it is: "gorovod-data rank=R size=N". The dialing side also
// names the lane it opens, as "from>to" ranks: its frames flow that way
// only, so "rank=3 size=4 lane=3>0" is rank 3's sending socket to rank 0
// and "lane=0>3" its receiving one.
//
// A lower rank that needs a link to a higher one before that rank has
// dialed it (links form on demand) asks for the dial: it connects with
// "gorovod-data rank=R size=N call", and the higher rank acknowledges,
// hangs up and dials the link's two lanes as it would have.
const (
	helloFormat = "gorovod-data rank=%d size=%d"
	laneFormat  = helloFormat + " lane=%d>%d"
	callFormat  = helloFormat + " call"
)

// callHello returns the hello of rank, asking a higher rank of a job of
// size ranks to dial it.
func callHello(rank, size int) []byte {
	return fmt.Appendf(nil, callFormat, rank, size)
}

// checkCallHello validates a call: a rank in [lo, hi) of a job of want
// ranks. ok is false when b is not a call at all.
func checkCallHello(b []byte, want, lo, hi int) (rank int, ok bool, err error) {
	var size int
	if _, err := fmt.Sscanf(string(b), callFormat, &rank, &size); err != nil || string(callHello(rank, size)) != string(b) {
		return 0, false, nil
	}
	return rank, true, checkClaim(rank, size, want, lo, hi)
}

// hello returns the hello of rank, accepting connections in a job of size
// ranks.
func hello(rank, size int) []byte {
	return fmt.Appendf(nil, helloFormat, rank, size)
}

// laneHello returns the hello of rank, dialing the lane that carries frames
// from rank from to rank to.
func laneHello(rank, size, from, to int) []byte {
	return fmt.Appendf(nil, laneFormat, rank, size, from, to)
}

// parseHello returns the rank and size an accepting peer's hello claims.
// Only the exact form hello produces is accepted.
func parseHello(b []byte) (rank, size int, err error) {
	if _, err := fmt.Sscanf(string(b), helloFormat, &rank, &size); err != nil {
		return 0, 0, fmt.Errorf("malformed hello %q", b)
	}
	if string(hello(rank, size)) != string(b) {
		return 0, 0, fmt.Errorf("malformed hello %q", b)
	}
	return rank, size, nil
}

// checkHello validates an accepting peer's hello: it must name a job of
// want ranks and a rank in [lo, hi).
func checkHello(b []byte, want, lo, hi int) (int, error) {
	rank, size, err := parseHello(b)
	if err != nil {
		return 0, err
	}
	return rank, checkClaim(rank, size, want, lo, hi)
}

func checkClaim(rank, size, want, lo, hi int) error {
	if size != want {
		return fmt.Errorf("peer claims rank %d of a job of %d ranks, this job has %d", rank, size, want)
	}
	if rank < lo || rank >= hi {
		return fmt.Errorf("peer claims rank %d, want a rank in [%d, %d)", rank, lo, hi)
	}
	return nil
}

// lane is one direction of a link, seen from this rank.
type lane int

const (
	laneOut  lane = iota // frames this rank sends
	laneIn               // frames this rank receives
	laneCall             // not a lane: a lower rank's call for a dial
)

// checkLaneHello validates a dialing peer's hello, received by rank self of
// a job of want ranks: a rank in [lo, hi) of the same job, opening a lane
// between itself and self. It returns the rank and the lane as self sees
// it.
func checkLaneHello(b []byte, self, want, lo, hi int) (int, lane, error) {
	var rank, size, from, to int
	_, err := fmt.Sscanf(string(b), laneFormat, &rank, &size, &from, &to)
	if err != nil || string(laneHello(rank, size, from, to)) != string(b) {
		return 0, 0, fmt.Errorf("malformed hello %q", b)
	}
	if err := checkClaim(rank, size, want, lo, hi); err != nil {
		return 0, 0, err
	}
	switch {
	case from == rank && to == self:
		return rank, laneIn, nil
	case from == self && to == rank:
		return rank, laneOut, nil
	}
	return 0, 0, fmt.Errorf("peer rank %d opens lane %d>%d, want %d>%d or %d>%d",
		rank, from, to, rank, self, self, rank)
}

// name spells the lane of the link between self and peer as "from>to".
func (l lane) name(self, peer int) string {
	if l == laneCall {
		return "call"
	}
	if l == laneOut {
		return fmt.Sprintf("%d>%d", self, peer)
	}
	return fmt.Sprintf("%d>%d", peer, self)
}
