package engine

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/gorovod/gorovod/collective"
)

// TestControlVector reduces three ranks' vectors with an element-wise Min
// (what the all-reduce does) and reads back the job-wide view.
func TestControlVector(t *testing.T) {
	const n, span = 3, 5
	vs := make([]controlVector, n)
	for r := range vs {
		vs[r].reset(r, n, 0, span)
		vs[r].set(ctlNoAbort, true)
		vs[r].set(ctlNoUncached, r != 1)
		vs[r].set(ctlIdle, r != 2)
		vs[r].setJoined(r == 2)
		vs[r].setShutdown(r == 1)
		vs[r].setPayload([]int{0, 70000, 3}[r])
		for _, s := range [][]int{{0, 2, 4}, {0, 4}, {0, 1, 4}}[r] {
			vs[r].setBit(s)
		}
	}
	vs[0].lowerAnswer(2, collective.AnswerGone)
	vs[1].lowerAnswer(2, collective.AnswerSilent) // the worse code wins
	vs[2].lowerAnswer(1, collective.AnswerGone)
	vs[2].lowerAnswer(1, collective.AnswerSilent)
	vs[2].lowerAnswer(1, collective.AnswerGone) // and stays
	if vs[0].answered(2) || !vs[0].answered(1) || vs[2].answered(1) {
		t.Fatal("answers before the reduction")
	}
	got := vs[0]
	got.b = bytes.Clone(vs[0].b)
	for _, v := range vs[1:] {
		for i := range got.b {
			got.b[i] = min(got.b[i], v.b[i])
		}
	}
	if !got.flag(ctlNoAbort) || got.flag(ctlNoUncached) || got.flag(ctlIdle) {
		t.Fatal("flags")
	}
	down := []bool{got.down(0), got.down(1), got.down(2)}
	if fmt.Sprint(got.joined(), down, got.payloads(), got.bits()) != "[false false true] [false true false] [0 70000 3] [1 0 0 0 1]" {
		t.Fatalf("joined %v shutdown %v payloads %v bits %v", got.joined(), down, got.payloads(), got.bits())
	}
	none := vs[0] // nobody joined: the shared slice of all false
	if j := none.joined(); fmt.Sprint(j) != "[false false false]" || &none.joined()[0] != &j[0] {
		t.Fatalf("joined %v with no rank joined, or a new slice each time", j)
	}
	if silent, gone := got.unanswered(); fmt.Sprint(silent, gone) != "[1 2] []" {
		t.Fatalf("silent %v gone %v, want [1 2] []", silent, gone)
	}
	// A reset reuses the buffer and clears the old contents.
	vs[0].reset(0, n, 0, 2)
	if len(vs[0].b) != ctlHeader+7*n+2 || vs[0].bits()[0] != 0 || fmt.Sprint(vs[0].payloads()) != "[0 4294967295 4294967295]" {
		t.Fatalf("after reset: %v", vs[0].b)
	}
	if silent, gone := vs[0].unanswered(); silent != nil || gone != nil {
		t.Fatalf("after reset: silent %v gone %v", silent, gone)
	}
}
