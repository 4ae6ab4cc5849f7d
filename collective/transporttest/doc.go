// Package transporttest is the conformance suite that every
// collective.Transport must pass.
//
// A transport's own tests hand Run a Factory that builds a connected mesh:
//
//	func TestConformance(t *testing.T) {
//		transporttest.Run(t, func(t *testing.T, size int) []collective.Transport {
//			return memtransport.NewNetwork(size).Transports()
//		})
//	}
//
// Run checks delivery (order, sizes from 0 B to 16 MiB, both directions at
// once, every pair of a 4-rank mesh at once), tag and length checking,
// cancellation and deadlines, Close on both ends of a link, sticky failures
// and goroutine leaks. Each subtest builds its own mesh, so one failure does
// not cascade into the others.
//
// The suite allows what differs between transports: a Send may return as soon
// as its bytes are buffered, and a Send or Recv cut short by its context may
// or may not fail the link afterwards (a stream transport must fail it,
// because a frame may be half written or half read).
package transporttest
