//go:build race

package main

// raceEnabled: the race detector slows the training loops ~20×.
const raceEnabled = true
