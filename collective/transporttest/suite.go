package transporttest

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/gorovod/gorovod/collective"
)

// Factory returns size connected transports, where element i has rank i.
// The suite closes every transport it gets; a factory may also register
// t.Cleanup for resources of its own (listeners, rendezvous servers). Those
// run before the suite checks for leaked goroutines.
type Factory func(t *testing.T, size int) []collective.Transport

// Run runs the conformance suite against the transports newMesh builds, one
// subtest per property, each on a fresh mesh. Subtests run one at a time
// because each checks that it leaves no goroutine behind.
//
// Beyond the contract written on collective.Transport, the suite requires:
// links are independent (a peer that closes does not disturb the other
// links), Close returns nil however often it is called, and a Recv returns
// within a second of its context ending.
func Run(t *testing.T, newMesh Factory) {
	cases := []struct {
		name string
		run  func(*testing.T, Factory)
	}{
		{"Identity", testIdentity},
		{"OrderedSteps", testOrderedSteps},
		{"EmptyMessages", testEmptyMessages},
		{"Sizes", testSizes},
		{"BothDirections", testBothDirections},
		{"AllPairs", testAllPairs},
		{"WaitAndReduce", testWaitAndReduce},
		{"Vectored", testVectored},
		{"WrongSeq", testWrongSeq},
		{"WrongStep", testWrongStep},
		{"WrongLength", testWrongLength},
		{"StickyAfterProtocolError", testStickyAfterProtocolError},
		{"CancelRecv", testCancelRecv},
		{"DeadlineRecv", testDeadlineRecv},
		{"UsableOrFailedAfterCancel", testAfterCancel},
		{"CloseUnblocksRecv", testCloseUnblocksRecv},
		{"CloseUnblocksSend", testCloseUnblocksSend},
		{"CallsAfterClose", testCallsAfterClose},
		{"CloseIdempotent", testCloseIdempotent},
		{"PeerCloseUnblocksRecv", testPeerCloseUnblocksRecv},
		{"PeerCloseLeavesOtherLinks", testPeerCloseLeavesOtherLinks},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkLeaks(t)
			c.run(t, newMesh)
		})
	}
}

// checkLeaks registers, before anything else, a cleanup that fails t if
// goroutines started after this call are still running. Cleanups run last
// in first out, so this one runs after the mesh and the factory's own
// resources are closed.
func checkLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// mesh builds size transports with newMesh and closes them when t ends.
func mesh(t *testing.T, newMesh Factory, size int) []collective.Transport {
	t.Helper()
	m := newMesh(t, size)
	t.Cleanup(func() {
		for i, tr := range m {
			if err := tr.Close(); err != nil {
				t.Errorf("rank %d: Close: %v", i, err)
			}
		}
	})
	if len(m) != size {
		t.Fatalf("factory returned %d transports, want %d", len(m), size)
	}
	return m
}
