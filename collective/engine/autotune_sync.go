package engine

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/gorovod/gorovod/collective"
)

// tuneBytes is the length of the control vector's autotuning section:
//
//	[0, 8)    fusion threshold, bytes (uint64, little endian)
//	[8, 12)   cycle time, microseconds (uint32)
//	[12]      hierarchical (collective.Hierarchy)
//	[13, 17)  cache capacity (uint32)
//	[17]      0: tuning is over, this is the chosen setting; 1: go on
//
// Rank 0 writes the setting its tuner asks for and every other rank 0xFF
// throughout, so the Min all-reduce yields rank 0's bytes on every rank.
const tuneBytes = 18

// autotune is a negotiator's part of autotuning. Every rank keeps the
// setting in effect, which the exchanged vectors change on every rank in
// the same cycle; rank 0 also runs the tuner and meters the steps.
type autotune struct {
	cur    tuneSetting // in effect on every rank
	frozen bool        // tuning is over: no section in the vector any more
	tuner  *tuner      // rank 0 only
	meter  stepMeter   // rank 0 only

	agreed     tuneSetting // this cycle's, from the exchanged vector
	agreedDone bool        // and whether rank 0 said tuning is over
}

// startTuning makes the negotiator carry an autotuning section in its
// control vectors, from plan.base, until rank 0's tuner is done. Every
// rank must call it, before its first cycle, or none.
func (n *negotiator) startTuning(plan tunePlan) {
	plan.base = plan.base.onWire()
	n.tune = &autotune{cur: plan.base}
	if n.rank == 0 {
		n.tune.tuner = newTuner(plan)
	}
}

// tuneSection is the length of the autotuning section of this cycle's
// control vector: tuneBytes while tuning, else 0.
func (n *negotiator) tuneSection() int {
	if n.tune == nil || n.tune.frozen {
		return 0
	}
	return tuneBytes
}

// proposeTuning writes this rank's part of the autotuning section.
func (n *negotiator) proposeTuning(b []byte) {
	if len(b) == 0 {
		return
	}
	t := n.tune.tuner
	if t == nil {
		for i := range b {
			b[i] = 0xFF
		}
		return
	}
	s := t.setting()
	binary.LittleEndian.PutUint64(b[0:], uint64(s.fusion))
	binary.LittleEndian.PutUint32(b[8:], uint32(s.cycle/time.Microsecond))
	b[12] = byte(s.hier)
	binary.LittleEndian.PutUint32(b[13:], uint32(s.cache))
	b[17] = b2u(!t.finished())
}

// readTuning reads the exchanged autotuning section, if any.
func (n *negotiator) readTuning(b []byte) {
	if len(b) == 0 {
		return
	}
	a := n.tune
	a.agreed = tuneSetting{
		fusion: int64(binary.LittleEndian.Uint64(b[0:])),
		cycle:  time.Duration(binary.LittleEndian.Uint32(b[8:])) * time.Microsecond,
		hier:   collective.Hierarchy(b[12]),
		cache:  int(binary.LittleEndian.Uint32(b[13:])),
	}
	a.agreedDone = b[17] == 0
}

// onWire returns s as the autotuning section carries it: the cycle time
// in whole microseconds (at least one), the cache capacity within 32 bits.
func (s tuneSetting) onWire() tuneSetting {
	s.fusion = max(s.fusion, 0)
	s.cycle = max(s.cycle.Truncate(time.Microsecond), time.Microsecond)
	s.cache = min(max(s.cache, 0), math.MaxUint32)
	return s
}

// tuneResult is what autotuning asks of the Engine after a cycle.
type tuneResult struct {
	// apply is the setting that takes effect after this cycle's tasks
	// (fusion and cache already have, in the negotiator; the Engine sets
	// the Comm's hierarchy and the cycle time), or nil.
	apply *tuneSetting
	// trials lists the trials that rank 0's tuner finished this cycle.
	trials []tuneTrial
	// chosen is, on rank 0 in the cycle that ends tuning, the best trial.
	chosen *tuneTrial
}

// tuneCycle does autotuning's part of a cycle once its tasks are decided:
// on rank 0 it meters the decided all-reduces into steps and feeds the
// tuner those taken wholly with its setting; on every rank it applies the
// exchanged setting where it changes, and stops tuning where rank 0 says
// it is over. Fusion and cache changes act on the next cycle's decisions;
// a cache change empties the cache (its pending hits are sent uncached),
// the same on every rank.
func (n *negotiator) tuneCycle(tasks []*task, now time.Time) tuneResult {
	a := n.tune
	if a == nil || a.frozen {
		return tuneResult{}
	}
	var res tuneResult
	if a.tuner != nil {
		res.trials = a.measure(tasks, now)
	}
	if a.agreed != a.cur {
		if a.agreed.cache != a.cur.cache {
			n.resetCache(a.agreed.cache)
		}
		a.cur, n.fusion = a.agreed, a.agreed.fusion
		s := a.cur
		res.apply = &s
	}
	if a.agreedDone {
		a.frozen = true
		if a.tuner != nil {
			c := a.tuner.chosen()
			res.chosen = &c
		}
	}
	return res
}

// measure feeds rank 0's tuner the steps that ended with tasks.
func (a *autotune) measure(tasks []*task, now time.Time) []tuneTrial {
	var out []tuneTrial
	for _, t := range tasks {
		r := &t.resp.req
		if t.err != nil || r.Kind != KindAllreduce {
			continue
		}
		bytes, d, ended := a.meter.add(t.resp.name, int64(r.Bytes()), now)
		if !ended || a.cur != a.tuner.setting() {
			continue // no step ended, or it ran with another setting
		}
		if tr, ok := a.tuner.step(bytes, d); ok {
			out = append(out, tr)
		}
	}
	return out
}

// resetCache replaces the response cache with an empty one of capacity
// entries; pending hits are sent uncached next cycle.
func (n *negotiator) resetCache(capacity int) {
	n.hits.slots(func(slot int, _ *entry) { n.unhit(slot) })
	n.cache = newResponseCache(capacity)
}
