package jobenv

import (
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"

	"github.com/gorovod/gorovod/internal/hostlist"
)

// ErrHostlist reports a malformed Slurm node list: a hostlist expression
// that ExpandHostlist cannot expand (such as SLURM_JOB_NODELIST), or a
// compressed per-node count list that ExpandTasksPerNode cannot expand (such
// as SLURM_TASKS_PER_NODE).
var ErrHostlist = errors.New("jobenv: bad Slurm node list")

// maxSlurmNodes bounds how many names ExpandHostlist and how many counts
// ExpandTasksPerNode return, so that hostile input cannot exhaust memory.
const maxSlurmNodes = 1 << 16

// hostRange is one range of a hostlist bracket, "lo-hi" or "lo": the numbers
// lo..hi, zero-padded to width digits (the width of lo as written).
type hostRange struct {
	lo, hi uint64
	width  int
}

// hostPart is one part of a hostlist item: literal text, or the ranges of
// one bracket and the count of numbers they hold.
type hostPart struct {
	lit    string
	ranges []hostRange // nil for a literal part
	size   int         // numbers in ranges; 1 for a literal part
}

// hostPattern is one parsed hostlist item: its parts in order, how many
// names it expands to and the length of the longest of them.
type hostPattern struct {
	parts  []hostPart
	count  int
	maxLen int
}

// ExpandHostlist expands a Slurm hostlist expression such as
// "gpu[01-03,07],login1" into host names in order: gpu01 gpu02 gpu03 gpu07 login1.
//
// The expression is a comma-separated list of items; commas inside brackets
// do not split items, and white space around an item is trimmed (white space
// anywhere else is an error). An item is literal text and bracketed range
// sets in any order, "n[1-2]-ib[3-4]", and expands to their cartesian
// product with the first bracket varying slowest: n1-ib3 n1-ib4 n2-ib3
// n2-ib4. A bracket holds comma-separated ranges, "[1-3,7,10-11]", each a
// number "5" or "lo-hi" with lo <= hi; numbers are zero-padded to the width
// of lo as written, so "gpu[08-11]" gives gpu08 gpu09 gpu10 gpu11 and
// "x[009-011]" gives x009 x010 x011. Literal text is made of host-name
// characters (letters, digits, '-', '.', '_'); an item must not start with
// '-' or '.', and no name may be longer than 253 bytes.
//
// Names are returned as expanded: a name listed twice appears twice (Slurm
// itself lists nodes uniquely). An empty expression or item, unbalanced or
// nested brackets, an empty range, a bound that is not a decimal number or
// overflows 64 bits, a reversed range, or an expansion to more than 65536
// names (refused before any name is built) is an error wrapping ErrHostlist.
func ExpandHostlist(expr string) ([]string, error) {
	patterns, total, err := parseHostlist(expr)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, total)
	for _, p := range patterns {
		names = p.appendNames(names)
	}
	return names, nil
}

// parseHostlist parses every item of expr and returns the items and the
// total number of names they expand to, at most maxSlurmNodes.
func parseHostlist(expr string) ([]hostPattern, int, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, 0, fmt.Errorf("%w: empty hostlist", ErrHostlist)
	}
	var patterns []hostPattern
	total := 0
	for n, item := range hostlistItems(expr) {
		item = strings.TrimSpace(item)
		p, err := parseHostlistItem(item)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: hostlist item %d %q: %w", ErrHostlist, n, clip(item, maxQuoted), err)
		}
		if total += p.count; total > maxSlurmNodes {
			return nil, 0, fmt.Errorf("%w: hostlist %q expands to more than %d names",
				ErrHostlist, clip(expr, maxQuoted), maxSlurmNodes)
		}
		patterns = append(patterns, p)
	}
	return patterns, total, nil
}

// hostlistItems yields the top-level items of expr with their 1-based
// positions, splitting at commas outside brackets. Brackets are matched
// loosely here; parseHostlistItem reports any imbalance.
func hostlistItems(expr string) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		depth, start, n := 0, 0, 1
		for i := 0; i < len(expr); i++ {
			switch expr[i] {
			case '[':
				depth++
			case ']':
				depth = max(depth-1, 0)
			case ',':
				if depth > 0 {
					continue
				}
				if !yield(n, expr[start:i]) {
					return
				}
				start, n = i+1, n+1
			}
		}
		yield(n, expr[start:])
	}
}

// parseHostlistItem parses one trimmed hostlist item, checking the number
// and the length of the names it expands to before any is built.
func parseHostlistItem(item string) (hostPattern, error) {
	if item == "" {
		return hostPattern{}, errors.New("empty item")
	}
	if item[0] == '-' || item[0] == '.' {
		return hostPattern{}, fmt.Errorf("a host name must not start with %q", item[:1])
	}
	p := hostPattern{count: 1}
	for rest := item; rest != ""; {
		part, tail, err := nextHostPart(rest)
		if err != nil {
			return hostPattern{}, err
		}
		if err := p.add(part); err != nil {
			return hostPattern{}, err
		}
		rest = tail
	}
	return p, nil
}

// add appends part to p, refusing a pattern that would expand to more than
// maxSlurmNodes names or to a name longer than hostlist.MaxNameLen bytes.
func (p *hostPattern) add(part hostPart) error {
	if p.count > maxSlurmNodes/part.size {
		return fmt.Errorf("expands to more than %d names", maxSlurmNodes)
	}
	p.count *= part.size
	if p.maxLen += part.maxLen(); p.maxLen > hostlist.MaxNameLen {
		return fmt.Errorf("expands to names longer than %d bytes", hostlist.MaxNameLen)
	}
	p.parts = append(p.parts, part)
	return nil
}

// nextHostPart splits the first part off a non-empty item: a bracket and
// its ranges, or the literal text up to the next bracket.
func nextHostPart(s string) (part hostPart, rest string, err error) {
	switch s[0] {
	case '[':
		end := strings.IndexAny(s[1:], "[]") + 1
		if end == 0 {
			return hostPart{}, "", errors.New("'[' without ']'")
		}
		if s[end] == '[' {
			return hostPart{}, "", errors.New("nested '['")
		}
		part, err = parseHostBracket(s[1:end])
		return part, s[end+1:], err
	case ']':
		return hostPart{}, "", errors.New("']' without '['")
	}
	end := strings.IndexAny(s, "[]")
	if end < 0 {
		end = len(s)
	}
	for _, c := range []byte(s[:end]) {
		if !hostlist.IsNameByte(c) {
			return hostPart{}, "", fmt.Errorf("character %q is not allowed in a host name", rune(c))
		}
	}
	return hostPart{lit: s[:end], size: 1}, s[end:], nil
}

// parseHostBracket parses the inside of a bracket, "1-3,7", refusing one
// that holds more than maxSlurmNodes numbers.
func parseHostBracket(s string) (hostPart, error) {
	if s == "" {
		return hostPart{}, errors.New("empty brackets")
	}
	var part hostPart
	for text := range strings.SplitSeq(s, ",") {
		r, err := parseHostRange(text)
		if err != nil {
			return hostPart{}, err
		}
		if part.size += int(r.hi-r.lo) + 1; part.size > maxSlurmNodes {
			return hostPart{}, fmt.Errorf("brackets %q hold more than %d numbers", "["+clip(s, maxQuoted)+"]", maxSlurmNodes)
		}
		part.ranges = append(part.ranges, r)
	}
	return part, nil
}

// parseHostRange parses one range of a bracket, "lo-hi" or "lo".
func parseHostRange(s string) (hostRange, error) {
	if s == "" {
		return hostRange{}, errors.New("empty range in brackets")
	}
	loText, hiText, isRange := strings.Cut(s, "-")
	lo, err := parseHostBound(loText, s)
	if err != nil {
		return hostRange{}, err
	}
	hi := lo
	if isRange {
		if hi, err = parseHostBound(hiText, s); err != nil {
			return hostRange{}, err
		}
	}
	if hi < lo {
		return hostRange{}, fmt.Errorf("range %q is reversed (%d > %d)", clip(s, maxQuoted), lo, hi)
	}
	if hi-lo >= maxSlurmNodes {
		return hostRange{}, fmt.Errorf("range %q holds more than %d numbers", clip(s, maxQuoted), maxSlurmNodes)
	}
	return hostRange{lo: lo, hi: hi, width: len(loText)}, nil
}

// parseHostBound parses one bound of the range rng: decimal digits that fit
// in 64 bits.
func parseHostBound(b, rng string) (uint64, error) {
	if b == "" {
		return 0, fmt.Errorf("range %q has an empty bound", clip(rng, maxQuoted))
	}
	for _, c := range []byte(b) {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("range %q: bound %q is not a decimal number", clip(rng, maxQuoted), clip(b, maxQuoted))
		}
	}
	v, err := strconv.ParseUint(b, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("range %q: bound %s overflows 64 bits", clip(rng, maxQuoted), clip(b, maxQuoted))
	}
	return v, nil
}

// maxLen returns the length of the longest text that part expands to.
func (part hostPart) maxLen() int {
	if part.ranges == nil {
		return len(part.lit)
	}
	n := 0
	for _, r := range part.ranges {
		n = max(n, r.width, len(strconv.FormatUint(r.hi, 10)))
	}
	return n
}

// appendNames appends the names that p expands to, the first bracket
// varying slowest.
func (p hostPattern) appendNames(names []string) []string {
	cur := []string{""}
	for _, part := range p.parts {
		cur = part.extend(cur)
	}
	return append(names, cur...)
}

// extend returns each of prefixes followed by each text of part, in order.
// It may reuse prefixes.
func (part hostPart) extend(prefixes []string) []string {
	if part.ranges == nil {
		for i := range prefixes {
			prefixes[i] += part.lit
		}
		return prefixes
	}
	out := make([]string, 0, len(prefixes)*part.size)
	for _, pre := range prefixes {
		for _, r := range part.ranges {
			for v := r.lo; ; v++ {
				out = append(out, pre+padNumber(v, r.width))
				if v == r.hi {
					break
				}
			}
		}
	}
	return out
}

// padNumber formats v in decimal with leading zeros up to width digits.
func padNumber(v uint64, width int) string {
	s := strconv.FormatUint(v, 10)
	if len(s) < width {
		s = strings.Repeat("0", width-len(s)) + s
	}
	return s
}

// countRun is one item of a compressed per-node count list: count, repeated
// for repeat nodes.
type countRun struct {
	count, repeat int
}

// ExpandTasksPerNode expands Slurm's compressed per-node counts, as in
// SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE / SLURM_JOB_CPUS_PER_NODE:
// "2(x3),1" -> [2 2 2 1].
//
// Items are separated by commas, with white space around them trimmed; each
// is "N" or "N(xM)" (N repeated for M nodes), where N is 1..MaxSlotsPerHost
// and M is at least 1, both in decimal. An empty list or item, any other
// form, or counts for more than 65536 nodes in all (refused before any is
// built) is an error wrapping ErrHostlist.
func ExpandTasksPerNode(s string) ([]int, error) {
	runs, total, err := parseCountRuns(s)
	if err != nil {
		return nil, err
	}
	counts := make([]int, 0, total)
	for _, r := range runs {
		for range r.repeat {
			counts = append(counts, r.count)
		}
	}
	return counts, nil
}

// parseCountRuns parses every item of a per-node count list and returns the
// items and the number of nodes they cover, at most maxSlurmNodes.
func parseCountRuns(s string) ([]countRun, int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, 0, fmt.Errorf("%w: empty per-node count list", ErrHostlist)
	}
	var runs []countRun
	total, n := 0, 0
	for item := range strings.SplitSeq(s, ",") {
		n++
		item = strings.TrimSpace(item)
		r, err := parseCountRun(item)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: per-node counts item %d %q: %w", ErrHostlist, n, clip(item, maxQuoted), err)
		}
		if total += r.repeat; total > maxSlurmNodes {
			return nil, 0, fmt.Errorf("%w: per-node counts %q cover more than %d nodes",
				ErrHostlist, clip(s, maxQuoted), maxSlurmNodes)
		}
		runs = append(runs, r)
	}
	return runs, total, nil
}

// parseCountRun parses one trimmed item of a per-node count list, "N" or "N(xM)".
func parseCountRun(item string) (countRun, error) {
	if item == "" {
		return countRun{}, errors.New("empty item")
	}
	count, rep, hasRep := strings.Cut(item, "(")
	r := countRun{repeat: 1}
	var err error
	if r.count, err = parseSlurmCount(count, "count", hostlist.MaxSlotsPerHost); err != nil {
		return countRun{}, err
	}
	if !hasRep {
		return r, nil
	}
	inner, okX := strings.CutPrefix(rep, "x")
	inner, okParen := strings.CutSuffix(inner, ")")
	if !okX || !okParen {
		return countRun{}, errors.New(`want "N" or "N(xM)"`)
	}
	if r.repeat, err = parseSlurmCount(inner, "repeat count", maxSlurmNodes); err != nil {
		return countRun{}, err
	}
	return r, nil
}

// parseSlurmCount parses a count named what: decimal digits, 1..limit.
func parseSlurmCount(s, what string, limit int) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("missing %s", what)
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%s %q is not a positive integer", what, clip(s, maxQuoted))
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > limit {
		return 0, fmt.Errorf("%s %s exceeds the limit of %d", what, clip(s, maxQuoted), limit)
	}
	if n == 0 {
		return 0, fmt.Errorf("%s must be at least 1", what)
	}
	return n, nil
}
