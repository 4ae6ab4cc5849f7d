package engine

import "log/slog"

// initTuning starts autotuning when Config.Autotune asks for it and the
// job has more than one rank (one rank alone has nothing to tune): every
// rank starts from its configuration and the Comm's hierarchical choice,
// and rank 0 runs the search and writes the log.
func (e *Engine) initTuning() {
	if !e.cfg.Autotune || e.size < 2 {
		return
	}
	plan := defaultTunePlan(e.cfg, e.c.Hierarchical(), e.c.HierarchicalLayout())
	if e.cfg.tunePlan != nil {
		e.cfg.tunePlan(&plan)
	}
	e.neg.startTuning(plan)
	if e.rank != 0 {
		return
	}
	if e.cfg.AutotuneLog != nil {
		e.tuneLog = newTuneLog(e.cfg.AutotuneLog)
	}
	e.log.Info("engine: autotune: starting from "+plan.base.String(),
		"steps_per_trial", plan.steps, "hierarchical_tuned", plan.hiers != nil)
}

// retune carries out the Engine's side of a cycle's autotuning, after the
// cycle's tasks: the Comm's hierarchy and the cycle time of a new setting
// (the negotiator has applied the rest), the log records and rank 0's CSV
// rows.
func (e *Engine) retune(res tuneResult) {
	if res.apply != nil {
		e.c.SetHierarchical(res.apply.hier)
		e.cycleTime = res.apply.cycle
	}
	if res.apply == nil && res.trials == nil && res.chosen == nil {
		return
	}
	for _, n := range tuneNotes(res, e.Stats().Cycles) {
		e.note(n)
	}
	if e.tuneLog == nil {
		return
	}
	for _, tr := range res.trials {
		e.tuneLog.trial(tr)
	}
	if res.chosen != nil {
		e.tuneLog.chosen(*res.chosen)
	}
	if err := e.tuneLog.err; err != nil {
		e.log.Warn("engine: autotune: writing the log", "err", err)
		e.tuneLog = nil
	}
}

// tuneNotes are the log records of a cycle's autotuning: rank 0's trials
// (debug) and choice (info), every rank's change of setting (debug).
func tuneNotes(res tuneResult, cycle uint64) []*logNote {
	var out []*logNote
	for _, tr := range res.trials {
		out = append(out, &logNote{level: slog.LevelDebug, msg: "engine: autotune: trial",
			args: []any{"trial", tr.index, "setting", tr.set.String(), "bytes", tr.bytes,
				"seconds", tr.elapsed.Seconds(), "bytes_per_s", tr.score()}})
	}
	if res.apply != nil {
		out = append(out, &logNote{level: slog.LevelDebug, msg: "engine: autotune: applying",
			args: []any{"cycle", cycle, "setting", res.apply.String()}})
	}
	if c := res.chosen; c != nil {
		out = append(out, &logNote{level: slog.LevelInfo, msg: "engine: autotune: chose " + c.set.String(),
			args: []any{"trial", c.index, "bytes_per_s", c.score()}})
	}
	return out
}
