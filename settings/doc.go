// Package settings holds a job's tuning knobs and their one set of
// defaults: the engine's (fusion threshold, cycle time, response cache,
// stall times, operation timeout) in Engine, and with them the start
// timeout, timeline path, log level and shared-memory switch in Knobs.
//
// It is a leaf: it imports only the standard library, so the launcher
// (runner, cmd/gorun), the user API (hvd) and the engine
// (collective/engine) all embed the same structs instead of copying their
// fields. Nothing here reads the environment: jobenv/env.go is the one
// place that names the GOROVOD_* variables that carry these knobs to every
// rank, and it validates them there.
package settings
