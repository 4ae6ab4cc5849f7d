package collective

import "testing"

// TestDoublingExchanges: recursive doubling runs on the exchange executor
// on a power of two ranks, two included, and never where ranks fold in.
func TestDoublingExchanges(t *testing.T) {
	for size, want := range map[int]bool{1: false, 2: true, 3: false, 4: true, 6: false, 8: true, 12: false, 16: true} {
		if got := doublingExchanges(size); got != want {
			t.Errorf("doublingExchanges(%d) = %v, want %v", size, got, want)
		}
	}
}
