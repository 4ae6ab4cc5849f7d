// Package settings holds a job's tuning knobs and their one set of
// defaults: the engine's (fusion threshold, cycle time, response cache,
// stall times, operation timeout) in Engine, and with them the start
// timeout, timeline path, log level and shared-memory switch in Knobs.
//
// Table describes each knob once for every place that names it: gorun's
// flag (and config-file key), its help and category, the GOROVOD_
// variable that carries it to the ranks, and how the flag and the variable
// spell its value (Value: String formats, Set parses). gorun's flags,
// --help, its man page and completion, and the ranks' environment
// (jobenv.Env) all follow it, so a new knob is a field here, its default
// in Defaults, one entry of Table, and a row of the README's flag table.
//
// It is a leaf: it imports only the standard library, so the launcher
// (runner, cmd/gorun), the user API (hvd) and the engine
// (collective/engine) all embed the same structs instead of copying their
// fields. Nothing here reads the environment or a command line: it only
// names the variables and flags, and parses the text it is handed;
// jobenv/env.go reads the variables and validates the knobs.
package settings
