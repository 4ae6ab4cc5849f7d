package runner

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/jobenv"
)

// TestHeartbeatsCutOffHost: workers 0 and 1 on host a, 2 on host b, all
// beating. Worker 0 stops first, worker 1 a little later (host a was cut
// off), worker 2 beats on: when worker 0 has stood still for
// jobenv.HeartbeatLimit, worker 1 goes with it, worker 2 stays.
func TestHeartbeatsCutOffHost(t *testing.T) {
	t0 := time.Unix(1000, 0)
	values := map[string]string{}
	read := func(key string) ([]byte, bool) { v, ok := values[key]; return []byte(v), ok }
	hostOf := func(r int) string { return []string{"a", "a", "b"}[r] }
	members := []int{0, 1, 2}
	h := newHeartbeats(read, 10*time.Second, t0)
	for _, r := range members {
		h.started(r, t0)
	}
	beat := func(r int, n string) { values[jobenv.AliveKey(elasticID(hostOf(r), r))] = n }
	for _, r := range members {
		beat(r, "1")
	}
	at := t0.Add(jobenv.HeartbeatInterval)
	if silent, why := h.look(members, hostOf, at); silent != nil || why != nil {
		t.Fatalf("first look: %v %v", silent, why)
	}
	if !h.next.Equal(at.Add(jobenv.HeartbeatInterval)) {
		t.Errorf("next look %v, want %v", h.next, at.Add(jobenv.HeartbeatInterval))
	}
	t1 := at.Add(time.Second) // worker 1 and 2 beat once more; 0 no longer
	beat(1, "2")
	beat(2, "2")
	if silent, why := h.look(members, hostOf, t1); silent != nil || why != nil {
		t.Fatalf("second look: %v %v", silent, why)
	}
	beat(2, "3")
	silent, why := h.look(members, hostOf, at.Add(jobenv.HeartbeatLimit))
	if !slices.Equal(silent, []int{0, 1}) {
		t.Fatalf("silent %v, want [0 1] (host a cut off)", silent)
	}
	for _, want := range []string{"runner: rank 0 on a sent no sign of life for 5s", "runner: rank 1 on a sent no sign of life for 4s either"} {
		if !strings.Contains(why.Error(), want) {
			t.Errorf("why %q, want %q in it", why, want)
		}
	}
}

// TestHeartbeatsNoneSent: a worker that never beats is silent only after
// the start timeout and jobenv.HeartbeatLimit, with a hint.
func TestHeartbeatsNoneSent(t *testing.T) {
	t0 := time.Unix(1000, 0)
	h := newHeartbeats(func(string) ([]byte, bool) { return nil, false }, 10*time.Second, t0)
	h.started(0, t0)
	hostOf := func(int) string { return "a" }
	limit := t0.Add(10*time.Second + jobenv.HeartbeatLimit)
	if silent, _ := h.look([]int{0}, hostOf, limit.Add(-time.Millisecond)); silent != nil {
		t.Fatalf("silent %v before the start timeout and the limit", silent)
	}
	silent, why := h.look([]int{0}, hostOf, limit)
	if !slices.Equal(silent, []int{0}) || !strings.Contains(why.Error(), "sent no sign of life for 15s since it started (does the program train through hvd.RunElastic?)") {
		t.Errorf("silent %v, %v; want rank 0 with the hint", silent, why)
	}
}
