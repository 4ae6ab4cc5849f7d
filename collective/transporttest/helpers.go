package transporttest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
)

const (
	// opTimeout bounds every call that is expected to succeed, so that a
	// transport that deadlocks fails the test instead of hanging it.
	opTimeout = 30 * time.Second
	// settle is how long a call is given to block before the test acts on it.
	settle = 50 * time.Millisecond
	// prompt is how long a call may take to return once it has been
	// cancelled or its transport closed.
	prompt = time.Second
	// peerGoneWithin is how long a pending Recv may take to notice that its
	// peer closed.
	peerGoneWithin = 2 * time.Second
	// bulkWithin is how long a 64 MiB Send may take to return once Close is
	// called: a transport that buffers may still be copying it, which is
	// slow under the race detector on a loaded machine.
	bulkWithin = 10 * time.Second
)

// opContext returns a context that ends after opTimeout or with t.
func opContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

// payload returns n bytes determined by id, so a receiver can rebuild what
// the sender sent. The bytes repeat with a prime period, so a chunk moved by
// a power-of-two offset shows; only the first period is drawn at random,
// which keeps 16 MiB messages cheap under the race detector.
func payload(id uint64, n int) []byte {
	const period = 4099
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], id)
	p := make([]byte, n)
	rand.NewChaCha8(seed).Read(p[:min(n, period)])
	for done := period; done < n; done *= 2 {
		copy(p[done:], p[:done])
	}
	return p
}

// firstDiff returns the index of the first byte where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// async runs f on a new goroutine and returns a channel that receives its
// result. The channel is buffered, so the goroutine never waits for a reader.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// await returns the result from ch, failing t if none comes within d.
func await(t *testing.T, ch <-chan error, d time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
		return nil
	}
}

// blocked fails t if ch yields a result within settle: the call behind it
// should still be waiting.
func blocked(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned early (err = %v); it should block", what, err)
	case <-time.After(settle):
	}
}

// wantErr fails t unless err wraps target.
func wantErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err = %v, want an error wrapping %q", what, err, target)
	}
}

// wantNoErr fails t if err is not nil.
func wantNoErr(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// tag is shorthand for a collective.Tag.
func tag(seq uint64, step uint32) collective.Tag {
	return collective.Tag{Seq: seq, Step: step}
}
