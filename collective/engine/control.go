package engine

import (
	"encoding/binary"
	"slices"

	"github.com/gorovod/gorovod/collective"
)

// controlVector is the uint8 vector every rank contributes to the one Min
// all-reduce of a negotiation cycle. Every position holds 1 for "yes, fine
// by me" and 0 for "no", so Min is a logical AND across ranks:
//
//	[0]              noAbort      0: a rank saw a stall past the shutdown time
//	[1]              noUncached   0: a rank sends uncached requests this cycle
//	[2]              idle         1: no rank has anything pending or is joined
//	[3]              nothingNew   0: a rank took new submissions (or a Join)
//	                              since its last cycle
//	[4, 4+n)         notJoined[r] rank r writes 0 while joined, others 1
//	[4+n, 4+2n)      notShutdown[r]
//	[4+2n, 4+6n)     payload[r]   rank r writes the byte length of its
//	                              uncached requests (uint32, little endian),
//	                              others 0xFF, so Min yields rank r's value
//	[4+6n, 4+7n)     answer[r]    every rank writes collective.AnswerOK; a rank that
//	                              rank r did not answer in this exchange,
//	                              or whose link to r broke, lowers it (see
//	                              Engine.exchange), so the verdict reaches
//	                              every rank that is still exchanging
//	[4+7n, 4+7n+t)   autotuning   rank 0's setting, others 0xFF (see tuneBytes);
//	                              t is tuneBytes while autotuning, else 0
//	[4+7n+t, c)      cache bits   1 where the slot's request is pending
//	[c, ...)         early        the early all-reduce's section, if this
//	                              cycle carries one (see earlyAllreduce)
//
// The cache bit count is the response cache's span, and t, the same on
// every rank; without an early all-reduce the vector ends at c.
type controlVector struct {
	rank, size int
	tune       int // the length of the autotuning section
	end        int // where the cache bits end
	b          []byte
	noneJoined []bool // what joined returns while no rank is joined
}

const (
	ctlNoAbort    = 0
	ctlNoUncached = 1
	ctlIdle       = 2
	ctlNothingNew = 3
	ctlHeader     = 4
)

// reset sizes the vector for an autotuning section of tune bytes and span
// cache bits, and fills it with neutral values: every flag 1, every other
// rank's payload 0xFF, this rank's 0, every answer collective.AnswerOK,
// the autotuning section and every cache bit 0.
func (v *controlVector) reset(rank, size, tune, span int) {
	v.rank, v.size, v.tune = rank, size, tune
	n := ctlHeader + 7*size + tune + span
	v.end = n
	if cap(v.b) < n {
		v.b = make([]byte, n)
	}
	v.b = v.b[:n]
	for i := range v.b[:ctlHeader+2*size] {
		v.b[i] = 1
	}
	p := v.b[ctlHeader+2*size : ctlHeader+6*size]
	for i := range p {
		p[i] = 0xFF
	}
	binary.LittleEndian.PutUint32(p[4*rank:], 0)
	a := v.b[ctlHeader+6*size : ctlHeader+7*size]
	for i := range a {
		a[i] = collective.AnswerOK
	}
	clear(v.b[ctlHeader+7*size:])
}

// extend adds n bytes to the end of the vector, after the cache bits, for
// the section of the early all-reduce, and returns their index; their
// content is left as it was.
func (v *controlVector) extend(n int) int {
	at := len(v.b)
	v.b = slices.Grow(v.b, n)[:at+n]
	return at
}

func b2u(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// set writes one of the global flags.
func (v *controlVector) set(i int, yes bool) { v.b[i] = b2u(yes) }

// flag reads a global flag after the reduction.
func (v *controlVector) flag(i int) bool { return v.b[i] == 1 }

// setJoined and setShutdown write this rank's own entries.
func (v *controlVector) setJoined(joined bool) { v.b[ctlHeader+v.rank] = b2u(!joined) }

func (v *controlVector) setShutdown(down bool) { v.b[ctlHeader+v.size+v.rank] = b2u(!down) }

// setPayload writes the byte length of this rank's uncached requests.
func (v *controlVector) setPayload(n int) {
	binary.LittleEndian.PutUint32(v.b[ctlHeader+2*v.size+4*v.rank:], uint32(n))
}

// setBit marks cache slot as pending (or, for a joined rank, not objected to).
func (v *controlVector) setBit(slot int) { v.b[ctlHeader+7*v.size+v.tune+slot] = 1 }

// tuning returns the autotuning section (a view into the vector).
func (v *controlVector) tuning() []byte { return v.b[ctlHeader+7*v.size : ctlHeader+7*v.size+v.tune] }

// answerAt is the index of rank r's answer code in b.
func (v *controlVector) answerAt(r int) int { return ctlHeader + 6*v.size + r }

// lowerAnswer records that rank r failed this rank's exchange with code
// (collective.AnswerSilent or collective.AnswerGone); a worse code already there stays.
func (v *controlVector) lowerAnswer(r int, code byte) {
	i := v.answerAt(r)
	v.b[i] = min(v.b[i], code)
}

// answered reports whether no rank has recorded a failure of rank r so far
// (during the exchange: as far as this rank has heard).
func (v *controlVector) answered(r int) bool { return v.b[v.answerAt(r)] == collective.AnswerOK }

// unanswered returns, after the exchange, the ranks that some rank found
// silent and those whose links broke, in rank order.
func (v *controlVector) unanswered() (silent, gone []int) {
	for r := range v.size {
		switch v.b[v.answerAt(r)] {
		case collective.AnswerSilent:
			silent = append(silent, r)
		case collective.AnswerGone:
			gone = append(gone, r)
		}
	}
	return silent, gone
}

// joined returns, after the reduction, which ranks are joined; the
// caller must not modify it. While no rank is joined (nearly always) it
// is one slice of all false, made once, rather than a new one a cycle.
func (v *controlVector) joined() []bool {
	for r := range v.size {
		if v.b[ctlHeader+r] == 0 {
			return v.zeros(ctlHeader)
		}
	}
	if len(v.noneJoined) != v.size {
		v.noneJoined = make([]bool, v.size)
	}
	return v.noneJoined
}

// down reports, after the reduction, whether rank r is shutting down.
func (v *controlVector) down(r int) bool { return v.b[ctlHeader+v.size+r] == 0 }

func (v *controlVector) zeros(base int) []bool {
	out := make([]bool, v.size)
	for r := range out {
		out[r] = v.b[base+r] == 0
	}
	return out
}

// payloads returns, after the reduction, every rank's payload length.
func (v *controlVector) payloads() []int { return v.appendPayloads(make([]int, 0, v.size)) }

// appendPayloads appends every rank's payload length to dst.
func (v *controlVector) appendPayloads(dst []int) []int {
	for r := range v.size {
		dst = append(dst, int(binary.LittleEndian.Uint32(v.b[ctlHeader+2*v.size+4*r:])))
	}
	return dst
}

// bits returns the cache bits (a view into the vector).
func (v *controlVector) bits() []byte { return v.b[ctlHeader+7*v.size+v.tune : v.end] }
