package transporttest

import (
	"context"
	"testing"
	"time"
)

// testCancelRecv expects cancelling a pending Recv to end it at once with an
// error wrapping context.Canceled.
func testCancelRecv(t *testing.T, newMesh Factory) {
	m := mesh(t, newMesh, 2)
	ctx, cancel := context.WithCancel(t.Context())
	recv := async(func() error { return m[1].Conn(0).Recv(ctx, tag(1, 0), make([]byte, 8)) })
	blocked(t, recv, "Recv with nothing sent")
	cancel()
	wantErr(t, await(t, recv, prompt, "Recv after cancel"), context.Canceled, "cancelled Recv")
}

// testDeadlineRecv expects a pending Recv to end soon after its deadline
// with an error wrapping context.DeadlineExceeded.
func testDeadlineRecv(t *testing.T, newMesh Factory) {
	m := mesh(t, newMesh, 2)
	const d = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	recv := async(func() error { return m[1].Conn(0).Recv(ctx, tag(1, 0), make([]byte, 8)) })
	err := await(t, recv, d+prompt, "Recv past its deadline")
	wantErr(t, err, context.DeadlineExceeded, "Recv past its deadline")
}

// testAfterCancel allows either behaviour after a cancelled Recv: the link
// still works, or it has failed and says so at once. It must not swallow
// the next message and then block.
func testAfterCancel(t *testing.T, newMesh Factory) {
	m := mesh(t, newMesh, 2)
	ctx, cancel := context.WithCancel(t.Context())
	recv := async(func() error { return m[1].Conn(0).Recv(ctx, tag(1, 0), make([]byte, 8)) })
	blocked(t, recv, "Recv with nothing sent")
	cancel()
	wantErr(t, await(t, recv, prompt, "Recv after cancel"), context.Canceled, "cancelled Recv")

	f := flow{from: 0, to: 1, seq: 1, sizes: []int{8}}
	ctx = opContext(t)
	send := async(func() error { return f.send(ctx, m) })
	recv = async(func() error { return f.recv(ctx, m) })
	if err := await(t, recv, peerGoneWithin, "Recv after a cancelled Recv"); err != nil {
		t.Logf("link failed after cancel (allowed): %v", err)
	}
	if err := await(t, send, peerGoneWithin, "Send after a cancelled Recv"); err != nil {
		t.Logf("Send after cancel failed (allowed): %v", err)
	}
}
