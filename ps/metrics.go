package ps

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorovod/gorovod/rendezvous"
)

// clientCounts is what a Client counts for its task's metrics.
type clientCounts struct {
	pushes atomic.Int64 // Pushes answered

	mu        sync.Mutex
	pulls     int64 // Pulls answered
	global    int64 // the global step of the last Pull
	atPull    int64 // pushes when it was answered
	staleness int64 // see pulled
}

// pulled records a Pull that answered the global step global. The
// staleness is the pushes that the servers applied between this client's
// last two Pulls besides its own: how many other updates a gradient
// computed from the earlier Pull's values was late by.
func (k *clientCounts) pulled(global int64) {
	pushes := k.pushes.Load()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.pulls > 0 {
		k.staleness = max(global-k.global-(pushes-k.atPull), 0)
	}
	k.pulls++
	k.global, k.atPull = global, pushes
}

// snapshot returns the counts.
func (k *clientCounts) snapshot() (pushes, pulls, global, staleness int64) {
	pushes = k.pushes.Load()
	k.mu.Lock()
	defer k.mu.Unlock()
	return pushes, k.pulls, k.global, k.staleness
}

// LogScalars publishes scalars of training step step (the chief's loss,
// accuracy, learning rate) to gorun, for --metrics-dir and its dashboard,
// as hvd.LogScalars does for an all-reduce rank: it never blocks, and
// points that find its buffer full or nobody listening (no gorun, or
// gorun without --metrics-dir or --dashboard) are dropped and counted
// (DroppedScalars).
func (c *Chief) LogScalars(step int64, scalars map[string]float64) {
	c.job.pub.Log(step, scalars)
}

// DroppedScalars counts the points of LogScalars (and of the task's own
// series) that this task dropped.
func (j *Job) DroppedScalars() int64 { return j.pub.Dropped() }

// workerSeries publishes a worker's own series after each step, at the
// global step of its last Pull:
//
//	ps/steps          steps this worker ran
//	ps/step_seconds   the step's wall time
//	ps/pushes         Pushes this worker made
//	ps/pulls          Pulls this worker made
//	ps/global_step    the global step its last Pull answered
//	ps/staleness      the pushes of other workers that the servers applied
//	                  between its last two Pulls
func (j *Job) workerSeries(client *Client, steps int64, took time.Duration) {
	pushes, pulls, global, staleness := client.counts.snapshot()
	j.pub.Add(
		rendezvous.MetricPoint{Step: global, Name: "ps/steps", Value: float64(steps), Runtime: true},
		rendezvous.MetricPoint{Step: global, Name: "ps/step_seconds", Value: took.Seconds(), Runtime: true},
		rendezvous.MetricPoint{Step: global, Name: "ps/pushes", Value: float64(pushes), Runtime: true},
		rendezvous.MetricPoint{Step: global, Name: "ps/pulls", Value: float64(pulls), Runtime: true},
		rendezvous.MetricPoint{Step: global, Name: "ps/global_step", Value: float64(global), Runtime: true},
		rendezvous.MetricPoint{Step: global, Name: "ps/staleness", Value: float64(staleness), Runtime: true},
	)
}

// serverSeries publishes a parameter server's own series (Run gives it
// the server's Stats every second while they change, and at the end), at
// the server's step:
//
//	ps/server_step                 the server's step: pushes applied (or loaded)
//	ps/server_pushes               pushes it applied
//	ps/server_pulls                pulls it answered with values
//	ps/server_bytes_in             bytes of the gradients pushed to it
//	ps/server_bytes_out            bytes of the values it answered
//	ps/server_push_staleness/P     for the worker of rank P, the staleness of
//	                               its last push here: the pushes of others
//	                               applied between its last Pull and the push
func (j *Job) serverSeries(st ServerStats) {
	pts := make([]rendezvous.MetricPoint, 0, 5+len(st.Staleness))
	add := func(name string, v int64) {
		pts = append(pts, rendezvous.MetricPoint{Step: st.Step, Name: name, Value: float64(v), Runtime: true})
	}
	add("ps/server_step", st.Step)
	add("ps/server_pushes", st.Pushes)
	add("ps/server_pulls", st.Pulls)
	add("ps/server_bytes_in", st.BytesIn)
	add("ps/server_bytes_out", st.BytesOut)
	for w, v := range st.Staleness {
		add(metricsPSStaleness+strconv.Itoa(1+w), v) // worker w is rank 1+w
	}
	j.pub.Add(pts...)
}

// metricsPSStaleness is metrics.PSPushStalenessPrefix (ps does not import
// gorun's internal/metrics).
const metricsPSStaleness = "ps/server_push_staleness/"
