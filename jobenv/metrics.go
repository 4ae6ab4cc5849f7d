package jobenv

// The variables by which gorun tells its sidecar evaluator (gorun
// --evaluator) where to send its metrics (package evaluator): the
// rendezvous address, which SidecarEnviron leaves out so that the
// evaluator is no rank, and the rank number its points take in gorun's
// metrics (the number after the last rank). The workers of an elastic
// job get EnvMetricsRank too: their launch index, which stays theirs
// while their rank changes from generation to generation. Only gorun
// sets them, and only while it keeps metrics (--metrics-dir or
// --dashboard).
const (
	EnvMetricsAddr = "GOROVOD_METRICS_ADDR"
	EnvMetricsRank = "GOROVOD_METRICS_RANK"
)
