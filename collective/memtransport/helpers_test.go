package memtransport_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
)

// tag is shorthand for a collective.Tag.
func tag(seq uint64, step uint32) collective.Tag { return collective.Tag{Seq: seq, Step: step} }

// send sends p from c and fails t on error.
func send(t *testing.T, c collective.Conn, tg collective.Tag, p []byte) {
	t.Helper()
	if err := c.Send(context.Background(), tg, p); err != nil {
		t.Fatalf("Send %v: %v", tg, err)
	}
}

// recv receives n bytes on c and fails t on error.
func recv(t *testing.T, c collective.Conn, tg collective.Tag, n int) []byte {
	t.Helper()
	p := make([]byte, n)
	if err := c.Recv(context.Background(), tg, p); err != nil {
		t.Fatalf("Recv %v: %v", tg, err)
	}
	return p
}

// recvAsync starts a Recv of n bytes on c and returns its result channel.
func recvAsync(ctx context.Context, c collective.Conn, tg collective.Tag, n int) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- c.Recv(ctx, tg, make([]byte, n)) }()
	return ch
}

// await returns the result from ch, failing t if none comes within a second.
func await(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(time.Second):
		t.Fatal("call did not return within 1s")
		return nil
	}
}

// wantErr fails t unless err wraps target.
func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("err = %v, want an error wrapping %q", err, target)
	}
}
