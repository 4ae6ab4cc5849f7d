package tcptransport

import (
	"fmt"
)

// helloFormat is the application data each side binds into its handshake
// proof: the rank it claims and the size of the job it belongs to.
const helloFormat = "gorovod-data rank=%d size=%d"

// hello returns the handshake hello of rank in a job of size ranks.
func hello(rank, size int) []byte {
	return fmt.Appendf(nil, helloFormat, rank, size)
}

// parseHello returns the rank and size a peer's hello claims. Only the exact
// form hello produces is accepted.
func parseHello(b []byte) (rank, size int, err error) {
	if _, err := fmt.Sscanf(string(b), helloFormat, &rank, &size); err != nil {
		return 0, 0, fmt.Errorf("malformed hello %q", b)
	}
	if string(hello(rank, size)) != string(b) {
		return 0, 0, fmt.Errorf("malformed hello %q", b)
	}
	return rank, size, nil
}

// checkHello validates a hello received from a peer: it must name a job of
// want ranks and a rank in [lo, hi).
func checkHello(b []byte, want, lo, hi int) (int, error) {
	rank, size, err := parseHello(b)
	if err != nil {
		return 0, err
	}
	if size != want {
		return 0, fmt.Errorf("peer claims rank %d of a job of %d ranks, this job has %d", rank, size, want)
	}
	if rank < lo || rank >= hi {
		return 0, fmt.Errorf("peer claims rank %d, want a rank in [%d, %d)", rank, lo, hi)
	}
	return rank, nil
}
