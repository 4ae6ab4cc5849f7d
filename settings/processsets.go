package settings

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxProcessSetsText bounds the text of the process-sets knob: a longer
// list is refused rather than parsed.
const MaxProcessSetsText = 1 << 20

// ParseProcessSets reads a list of process sets: sets separated by ';',
// each a ','-separated list of job ranks, spaces allowed around either
// ("0,2; 1,3" is {0, 2} and {1, 3}); "" is none. It checks the syntax and
// that ranks are not negative; whether each set's ranks are ascending,
// distinct and inside the job is checked where the sets are added
// (hvd.Runtime.AddProcessSet, on every rank alike).
func ParseProcessSets(s string) ([][]int, error) {
	if len(s) > MaxProcessSetsText {
		return nil, fmt.Errorf("settings: a list of process sets of %d bytes, more than %d", len(s), MaxProcessSetsText)
	}
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var sets [][]int
	for i, set := range strings.Split(s, ";") {
		if strings.TrimSpace(set) == "" {
			return nil, fmt.Errorf("settings: process sets %q: set %d is empty (want ranks like \"0,2;1,3\")", s, i+1)
		}
		var ranks []int
		for _, f := range strings.Split(set, ",") {
			r, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || r < 0 {
				return nil, fmt.Errorf("settings: process sets %q: set %d: %q is not a rank (want ranks like \"0,2;1,3\")", s, i+1, strings.TrimSpace(f))
			}
			ranks = append(ranks, r)
		}
		sets = append(sets, ranks)
	}
	return sets, nil
}

// FormatProcessSets writes sets as ParseProcessSets reads them.
func FormatProcessSets(sets [][]int) string {
	var b strings.Builder
	for i, set := range sets {
		if i > 0 {
			b.WriteByte(';')
		}
		for j, r := range set {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(r))
		}
	}
	return b.String()
}

// processSetsValue is the process-sets knob: set from its text, which it
// checks and keeps in FormatProcessSets's spelling.
type processSetsValue struct{ p *string }

func (v processSetsValue) String() string { return *v.p }

func (v processSetsValue) Set(s string) error {
	sets, err := ParseProcessSets(s)
	if err != nil {
		return err
	}
	*v.p = FormatProcessSets(sets)
	return nil
}
