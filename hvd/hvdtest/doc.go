// Package hvdtest runs the ranks of a job inside one test process: n
// hvd.Runtimes, one per rank, over an in-memory network (or a loopback TCP
// mesh, or a rendezvous), each built from the Config of its rank.
//
// Start gives a test the runtimes and shuts them down when the test ends;
// Each runs a function on every rank at once; Run does both for a job that
// runs one function per rank from start to end, and needs no testing.TB,
// so examples use it too:
//
//	err := hvdtest.Run(4, func(rt *hvd.Runtime) error {
//		return rt.Allreduce(ctx, hvd.NewTensor("x", []float32{1}), kernels.Sum, hvd.ReduceOptions{})
//	})
package hvdtest
