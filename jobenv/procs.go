package jobenv

// GoMaxProcs is the GOMAXPROCS a rank gets by default (from gorun, and
// from hvd.Init under other launchers) when its share of its host's cpus
// processors is share: the share, but at least 2 where the host has 2. A
// rank's Go code computes while its runtime's engine communicates; with
// one processor for Go, the engine waits for the training goroutine to
// give it up, and while that goroutine is in a long cgo call (OpenBLAS)
// the Go runtime hands the processor over only after a delay that can
// reach 10 ms. On the 2-CPU test VM (2026-11-29, one build, five
// interleaved launches of three epochs each, one OpenBLAS thread per
// rank) mnist trained at medians of 48.1k samples/s with GOMAXPROCS=2
// against 41.7k with 1 at np 2, and 33.3k against 28.9k at np 4, while
// examples/allreduce_bench at np 4 ran small all-reduces faster with 1
// (4 KiB in 7.8 µs against 22.6), most of which went once polls stopped
// handing goroutines between threads (see ShareEvery in tcptransport's
// shmring: 10.8 µs against 8.9 with 1). An earlier build measured the
// opposite for mnist at np 2 (31.9k with 1 against 25.8k with 2), before
// shared-memory writers and TCP receives learned to poll.
func GoMaxProcs(share, cpus int) int {
	return max(share, min(2, cpus))
}
