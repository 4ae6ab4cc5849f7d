package transporttest

import (
	"bytes"
	"testing"

	"github.com/gorovod/gorovod/collective"
)

// split cuts p at the given lengths (the last part takes the rest),
// sharing p's storage.
func split(p []byte, lens ...int) [][]byte {
	var parts [][]byte
	for _, n := range lens {
		parts = append(parts, p[:n])
		p = p[n:]
	}
	return append(parts, p)
}

// testVectored checks collective.Vectored on links that implement it (the
// interface is optional; a transport without it has nothing to check
// here): a message gathered from parts, empty ones and a 1 MiB one among
// them, arrives as their concatenation whether it is received whole or
// scattered into parts cut elsewhere, a whole message can be received
// scattered, and a scattered receive of the wrong total length is refused.
func testVectored(t *testing.T, newMesh Factory) {
	m := mesh(t, newMesh, 2)
	send, okS := m[0].Conn(1).(collective.Vectored)
	recv, okR := m[1].Conn(0).(collective.Vectored)
	if !okS || !okR {
		return
	}
	ctx := opContext(t)
	want := payload(9, 3<<20)
	sendParts := split(bytes.Clone(want), 0, 1, 4095, 0, 1<<20, 7)
	wantNoErr(t, send.SendVec(ctx, tag(1, 0), sendParts), "SendVec")
	got := make([]byte, len(want))
	wantNoErr(t, m[1].Conn(0).Recv(ctx, tag(1, 0), got), "Recv of a gathered message")
	if i := firstDiff(got, want); i >= 0 {
		t.Fatalf("SendVec then Recv: first wrong byte at %d", i)
	}

	wantNoErr(t, send.SendVec(ctx, tag(1, 1), sendParts), "SendVec")
	clear(got)
	wantNoErr(t, recv.RecvVec(ctx, tag(1, 1), split(got, 3, 1<<21, 0, 5)), "RecvVec")
	if i := firstDiff(got, want); i >= 0 {
		t.Fatalf("SendVec then RecvVec: first wrong byte at %d", i)
	}

	wantNoErr(t, m[0].Conn(1).Send(ctx, tag(1, 2), want), "Send")
	clear(got)
	wantNoErr(t, recv.RecvVec(ctx, tag(1, 2), split(got, 1<<20, 1<<20)), "RecvVec of a whole message")
	if i := firstDiff(got, want); i >= 0 {
		t.Fatalf("Send then RecvVec: first wrong byte at %d", i)
	}

	wantNoErr(t, send.SendVec(ctx, tag(1, 3), [][]byte{want[:8], want[8:16]}), "SendVec")
	err := recv.RecvVec(ctx, tag(1, 3), [][]byte{make([]byte, 8), make([]byte, 9)})
	wantErr(t, err, collective.ErrProtocol, "RecvVec of 16 bytes into 17")
}
