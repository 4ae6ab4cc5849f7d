package runner

import (
	"context"
	"fmt"
	"time"
)

// elasticState is what a job started with MinNP > 0 keeps: the ranks of
// its current generation and how often it was formed anew.
type elasticState struct {
	gen     int   // the latest generation published
	members []int // the launch ranks in it, in its rank order
	resets  int   // generations formed after a failure
}

// elasticID is the name of the worker started as launch rank rank on
// host: unique for the job's life.
func elasticID(host string, rank int) string { return fmt.Sprintf("%s/%d", host, rank) }

// startElastic publishes the first generation: every started rank, in
// launch order.
func (j *job) startElastic() error {
	j.elastic = &elasticState{}
	for _, r := range j.ranks {
		if r != nil {
			j.elastic.members = append(j.elastic.members, r.slot.Rank)
		}
	}
	return j.publish()
}

// publish makes the current members the next generation.
func (j *job) publish() error {
	e := j.elastic
	e.gen++
	g := Generation{N: e.gen}
	for _, rank := range e.members {
		h := j.ranks[rank].slot.Host
		g.Members = append(g.Members, ElasticMember{ID: elasticID(h, rank), Host: h})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := PublishGeneration(ctx, j.srv, g); err != nil {
		return fmt.Errorf("runner: publishing generation %d of the elastic job: %w", g.N, err)
	}
	j.log.Info("gorun: elastic job formed", "generation", g.N, "size", len(g.Members))
	return nil
}

// lost takes in the failure of launch rank ex.rank in an elastic job: the
// job forms anew without it, unless that leaves fewer than MinNP ranks or
// the job was formed anew ResetLimit times already; then the failure
// stops the job (returned).
func (j *job) lost(ex rankExit) error {
	e := j.elastic
	at := -1
	for i, r := range e.members {
		if r == ex.rank {
			at = i
		}
	}
	if at < 0 { // not a member any more
		return nil
	}
	e.members = append(e.members[:at:at], e.members[at+1:]...)
	switch {
	case len(e.members) < j.cfg.MinNP:
		return fmt.Errorf("%w; %d %s left, fewer than --min-np %d", ex.err, len(e.members), plural(len(e.members), "rank"), j.cfg.MinNP)
	case j.cfg.ResetLimit > 0 && e.resets >= j.cfg.ResetLimit:
		return fmt.Errorf("%w; the elastic job was formed anew %d %s already (--reset-limit %d)", ex.err, e.resets, plural(e.resets, "time"), j.cfg.ResetLimit)
	}
	j.log.Warn("gorun: a rank of the elastic job failed; the others go on without it",
		"rank", ex.rank, "host", j.ranks[ex.rank].slot.Host, "err", ex.err, "left", len(e.members))
	e.resets++
	return j.publish()
}
