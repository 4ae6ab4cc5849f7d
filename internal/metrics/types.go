package metrics

import "time"

// This file is the contract between the parts of gorun's metrics: the
// ranks' batches arrive through the rendezvous and go into a Store
// (store.go), which the dashboard, /metrics and --metrics-dir read
// (package internal/dashboard). Only data types and the Source interface
// live here.

// Kind says where a series comes from.
type Kind string

// The kinds of series.
const (
	// Scalar is a value training code published (hvd.LogScalars).
	Scalar Kind = "scalar"
	// Runtime is a value gorovod's runtime published about itself
	// (names start with "hvd/": hvd/step_seconds, hvd/allreduce_bytes, …).
	Runtime Kind = "runtime"
)

// Point is one value of one series of one rank.
type Point struct {
	Rank  int       `json:"rank"`
	Host  string    `json:"host,omitempty"`
	Step  int64     `json:"step"`
	Time  time.Time `json:"time"`
	Kind  Kind      `json:"kind"`
	Name  string    `json:"name"`
	Value float64   `json:"value"`
}

// Event is something that happened to the job: a stall warning, a rank's
// failure or exit, an elastic re-formation.
type Event struct {
	Time time.Time `json:"time"`
	Rank int       `json:"rank"` // -1: the job
	Kind string    `json:"kind"` // "stall", "failure", "exit", "reformed", "started", "dropped"
	Text string    `json:"text"`
}

// RankInfo is the dashboard's row of one rank.
type RankInfo struct {
	Rank  int    `json:"rank"`
	Host  string `json:"host"`
	State string `json:"state"` // "starting", "running", "exited", "failed", "killed"; "evaluator" for gorun --evaluator's evaluator
	// Role is the process's role in a parameter-server job ("chief",
	// "worker", "ps") or "evaluator"; empty for an all-reduce rank.
	Role string `json:"role,omitempty"`
	// Step, StepSeconds and CommShare are the latest hvd/step,
	// hvd/step_seconds and hvd/comm_share published by the rank (0 before);
	// in a parameter-server job, a worker's Step and StepSeconds are its
	// ps/global_step and ps/step_seconds, a server's Step its
	// ps/server_step.
	Step        int64   `json:"step"`
	StepSeconds float64 `json:"step_seconds"`
	CommShare   float64 `json:"comm_share"`
	// LinkBytes[peer] is what this rank sent to peer: the latest value of
	// its series hvd/link_sent_bytes/<peer>, for the rank × rank heat map.
	LinkBytes map[int]float64 `json:"link_bytes,omitempty"`
	// Dropped counts the points this rank dropped (its buffer was full or
	// nobody was listening).
	Dropped int64 `json:"dropped"`
}

// Series is the bounded history of one series of one rank: at most the
// Store's limit of points, thinned evenly (every other point dropped) as
// it fills, so a long run keeps its whole shape.
type Series struct {
	Rank   int       `json:"rank"`
	Kind   Kind      `json:"kind"`
	Name   string    `json:"name"`
	Steps  []int64   `json:"steps"`
	Values []float64 `json:"values"`
}

// Snapshot is everything the dashboard shows at one moment.
type Snapshot struct {
	Job    string     `json:"job"` // a label: the program and np, never the secret or the environment
	Start  time.Time  `json:"start"`
	Ended  bool       `json:"ended"`
	Ranks  []RankInfo `json:"ranks"`
	Series []Series   `json:"series"`
	Events []Event    `json:"events"` // the most recent, at most the Store's limit
}

// Update is what a subscriber receives after the Store changed: the new
// points and events since the last Update it got (or, when it fell behind
// and some were dropped for it, Resync set: read a fresh Snapshot).
type Update struct {
	Points []Point    `json:"points,omitempty"`
	Events []Event    `json:"events,omitempty"`
	Ranks  []RankInfo `json:"ranks,omitempty"`
	Resync bool       `json:"resync,omitempty"`
	Ended  bool       `json:"ended,omitempty"`
}

// Source is what the dashboard, /metrics and the summary read. Every
// method is safe for concurrent use and never blocks on a reader: a
// subscriber whose channel is full misses updates and gets one with Resync.
type Source interface {
	Snapshot() Snapshot
	// Subscribe returns a channel of updates and a cancel function that
	// closes it; the channel is also closed when the Source is closed.
	Subscribe() (updates <-chan Update, cancel func())
}
