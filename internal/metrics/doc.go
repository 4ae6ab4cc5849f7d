// Package metrics holds what gorun keeps of a job's metrics: the scalars
// training code publishes with hvd.LogScalars and the runtime's own, per
// rank, in bounded memory, with the job's events; the dashboard, /metrics
// and --metrics-dir read it through Source.
package metrics
