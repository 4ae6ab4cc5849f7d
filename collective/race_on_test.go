//go:build race

package collective_test

// raceEnabled: the race detector slows element loops ~20×.
const raceEnabled = true
