package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// undefinedFlag is how the flag package reports a flag it does not know.
const undefinedFlag = "flag provided but not defined: -"

// suggestion returns " did you mean -np?" for an error about an unknown
// flag that is a typo of one of flags (a few letters off), else "".
func suggestion(err error, flags []cli.Flag) string {
	msg := err.Error()
	i := strings.Index(msg, undefinedFlag)
	if i < 0 {
		return ""
	}
	given := strings.TrimLeft(msg[i+len(undefinedFlag):], "-")
	best := closestName(given, flags, nil)
	if best == "" {
		return ""
	}
	dash := "--"
	if len(best) <= 2 {
		dash = "-"
	}
	return "; did you mean " + dash + best + "?"
}

// closestName returns the name or alias of one of flags (skipping those
// whose first name skip reports) that is a typo of given, a few letters
// off, or "" if none is.
func closestName(given string, flags []cli.Flag, skip func(name string) bool) string {
	best, bestDist := "", len(given)
	for _, f := range flags {
		if skip != nil && skip(f.Names()[0]) {
			continue
		}
		for _, name := range f.Names() {
			if d := editDistance(given, name); d < bestDist {
				best, bestDist = name, d
			}
		}
	}
	if bestDist > max(1, len(given)/3) {
		return ""
	}
	return best
}

// editDistance is the number of single-character insertions, deletions,
// substitutions and transpositions of adjacent characters that turn a
// into b.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
