package transporttest

import (
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
)

// testCloseUnblocksRecv expects Close to end a pending Recv with ErrClosed.
func testCloseUnblocksRecv(t *testing.T, newMesh Factory) {
	m := mesh(t, newMesh, 2)
	ctx := opContext(t)
	recv := async(func() error { return m[1].Conn(0).Recv(ctx, tag(1, 0), make([]byte, 8)) })
	blocked(t, recv, "Recv with nothing sent")
	wantNoErr(t, m[1].Close(), "Close")
	wantErr(t, await(t, recv, prompt, "Recv after Close"), collective.ErrClosed, "Recv pending at Close")
}

// testCloseUnblocksSend expects Close to end a Send that cannot finish
// because the peer never reads: it returns promptly with ErrClosed. A
// transport that buffers without bound may instead have finished the Send
// (nil), before Close or while Close ran; both are accepted.
func testCloseUnblocksSend(t *testing.T, newMesh Factory) {
	m := mesh(t, newMesh, 2)
	ctx := opContext(t)
	big := make([]byte, 64<<20)
	send := async(func() error { return m[0].Conn(1).Send(ctx, tag(1, 0), big) })
	time.Sleep(settle)
	wantNoErr(t, m[0].Close(), "Close")
	err := await(t, send, bulkWithin, "Send of 64 MiB after Close")
	if err == nil {
		t.Log("Send of 64 MiB with no reader returned nil: the transport buffered it")
		return
	}
	wantErr(t, err, collective.ErrClosed, "Send pending at Close")
}

// testCallsAfterClose expects calls on a closed transport to fail at once
// with ErrClosed.
func testCallsAfterClose(t *testing.T, newMesh Factory) {
	m := mesh(t, newMesh, 2)
	ctx := opContext(t)
	wantNoErr(t, m[0].Close(), "Close")
	c := m[0].Conn(1)
	send := async(func() error { return c.Send(ctx, tag(1, 0), payload(1, 8)) })
	wantErr(t, await(t, send, prompt, "Send after Close"), collective.ErrClosed, "Send after Close")
	recv := async(func() error { return c.Recv(ctx, tag(1, 0), make([]byte, 8)) })
	wantErr(t, await(t, recv, prompt, "Recv after Close"), collective.ErrClosed, "Recv after Close")
}

// testCloseIdempotent expects every Close after the first to return nil too.
func testCloseIdempotent(t *testing.T, newMesh Factory) {
	m := mesh(t, newMesh, 2)
	for range 3 {
		wantNoErr(t, m[0].Close(), "Close")
	}
}

// testPeerCloseUnblocksRecv expects a peer's Close to end a pending Recv
// with ErrPeerGone, and the link to stay failed.
func testPeerCloseUnblocksRecv(t *testing.T, newMesh Factory) {
	m := mesh(t, newMesh, 2)
	ctx := opContext(t)
	c := m[1].Conn(0)
	recv := async(func() error { return c.Recv(ctx, tag(1, 0), make([]byte, 8)) })
	blocked(t, recv, "Recv with nothing sent")
	wantNoErr(t, m[0].Close(), "peer Close")
	wantErr(t, await(t, recv, peerGoneWithin, "Recv after peer Close"), collective.ErrPeerGone, "Recv pending at peer Close")
	again := async(func() error { return c.Recv(ctx, tag(1, 0), make([]byte, 8)) })
	wantErr(t, await(t, again, prompt, "second Recv after peer Close"), collective.ErrPeerGone, "second Recv")
}

// testPeerCloseLeavesOtherLinks expects links that do not touch a closed
// rank to keep working.
func testPeerCloseLeavesOtherLinks(t *testing.T, newMesh Factory) {
	m := mesh(t, newMesh, 3)
	wantNoErr(t, m[2].Close(), "Close of rank 2")
	runFlows(t, m, flow{from: 0, to: 1, seq: 1, sizes: []int{8, 1 << 20}}, flow{from: 1, to: 0, seq: 1, sizes: []int{8}})
}
