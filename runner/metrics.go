package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/gorovod/gorovod/internal/metrics"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/rendezvous"
)

// MetricsFile is the name of the file in Config.MetricsDir.
const MetricsFile = "metrics.jsonl"

// NewMetricsStore makes the Store of c's job (see Config.Metrics): its
// label is the program and -np, and with c.MetricsDir set it writes
// DIR/metrics.jsonl (the directory is created). Close it after Launch.
func NewMetricsStore(c Config) (*metrics.Store, error) {
	mc := metrics.Config{Job: jobLabel(c), Logger: c.logger()}
	if c.MetricsDir != "" {
		if err := os.MkdirAll(c.MetricsDir, 0o755); err != nil {
			return nil, fmt.Errorf("runner: metrics directory: %w", err)
		}
		w, err := metrics.NewWriter(filepath.Join(c.MetricsDir, MetricsFile), 0, c.logger())
		if err != nil {
			return nil, fmt.Errorf("runner: %w", err)
		}
		mc.Out = w
	}
	return metrics.NewStore(mc), nil
}

// jobLabel is "train -np 4": the program's name and the number of ranks.
func jobLabel(c Config) string {
	prog := "job"
	if len(c.Command) > 0 {
		prog = filepath.Base(c.Command[0])
	}
	return prog + " -np " + strconv.Itoa(c.NP)
}

// openMetrics returns the Store of the job (c.Metrics: Launch makes one
// when --metrics-dir or --dashboard asks for it; nil for neither) and
// what to do once the job is over: mark it ended (its maker closes it).
func openMetrics(c Config) (*metrics.Store, func()) {
	if c.Metrics == nil {
		return nil, func() {}
	}
	return c.Metrics, c.Metrics.End
}

// metricsReceiver is the rendezvous server's OnMetrics for st (see
// Store.AddRankPoints). Nil without a Store, so that the ranks learn that
// nobody takes their points and stop sending them.
func metricsReceiver(st *metrics.Store) func(int, []rendezvous.MetricPoint) {
	if st == nil {
		return nil
	}
	return st.AddRankPoints
}

// rankStarted tells the job's Store that rank started on host; the
// evaluator, whose results arrive under its number, is a row in state
// "evaluator". In a parameter-server job, each row has its role.
func (j *job) rankStarted(rank int, host string) {
	if j.metrics == nil {
		return
	}
	if role := j.metricsRole(rank); role != "" {
		j.metrics.SetRole(rank, role)
	}
	if rank == j.evaluatorIndex() {
		j.metrics.SetRank(rank, host, "evaluator")
	} else {
		j.metrics.SetRank(rank, host, "running")
	}
}

// metricsRole is rank's role for its row: "evaluator", or in a
// parameter-server job "chief", "worker" or "ps"; "" for an all-reduce rank.
func (j *job) metricsRole(rank int) string {
	switch {
	case rank == j.evaluatorIndex():
		return jobenv.RoleEvaluator
	case j.cfg.PS <= 0:
		return ""
	case rank == 0:
		return jobenv.RoleChief
	case rank <= j.cfg.NP:
		return jobenv.RoleWorker
	}
	return jobenv.RolePS
}

// rankEnded tells the job's Store how rank ended: "exited" (status 0),
// "killed" (it failed once the job was stopping), else "failed", with an
// event of kind "exit" or "failure".
func (j *job) rankEnded(rank int, err error) {
	if j.metrics == nil || rank == j.evaluatorIndex() {
		return
	}
	state, kind, text := "exited", "exit", "exited with status 0"
	if err != nil {
		state, kind, text = "failed", "failure", err.Error()
		var ex *ExitError
		if j.failure != nil || errors.As(err, &ex) && ex.Signal != "" {
			state = "killed"
		}
		if j.failure != nil {
			kind = "exit"
		}
	}
	j.metrics.SetRank(rank, "", state)
	j.metrics.AddEvent(metrics.Event{Rank: rank, Kind: kind, Text: text})
}

// metricsRankEnv tells an elastic worker, while the job keeps metrics,
// the number its points take (jobenv.EnvMetricsRank): its launch index,
// which its row in the Store has in every generation (its rank changes).
func (j *job) metricsRankEnv(launchIndex int) []string {
	if j.metrics == nil {
		return nil
	}
	return []string{jobenv.EnvMetricsRank + "=" + strconv.Itoa(launchIndex)}
}

// jobEvent records an event of the whole job (rank -1) in its Store.
func (j *job) jobEvent(kind, text string) {
	if j.metrics != nil {
		j.metrics.AddEvent(metrics.Event{Rank: -1, Kind: kind, Text: text})
	}
}
