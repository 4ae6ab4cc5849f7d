// Package lifecycle holds the two pieces that the gorpc services
// (rendezvous, and ps's servers, client and coordinator) use to shut down
// without waiting on a deadline: Gate, which admits goroutines until it is
// shut and then waits for them, and Conns, which tracks connections that
// gorpc cannot interrupt so that shutting down can close them.
package lifecycle
