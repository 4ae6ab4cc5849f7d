// Package deadline provides Clock, a deadline context that one goroutine
// at a time re-arms for operation after operation. Against a
// context.WithDeadline per operation it allocates nothing while no
// deadline passes, and the transports watch one long-lived context
// (tcptransport registers a context once per link and keeps it between
// calls). With those two changes and fewer clock reads, the engine's
// 4 KiB all-reduce step on the 2-CPU test VM went from 11.7 to 7.4 µs
// (BenchmarkEngineSmall, medians of three).
//
// It also provides Watch, which bounds operations that run one at a time
// without any context: a timer that ticks at an eighth of the limit
// finds the operation that ran past it and calls the owner's function,
// which fails what the operation waits on (collective.Options.OpTimeout).
package deadline
