package jobenv

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/internal/hostlist"
)

// TestExpandHostlist checks expansions of valid hostlists: padding, products,
// range lists, trimming, duplicates and the name-length edge.
func TestExpandHostlist(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"a", []string{"a"}},
		{"a,b", []string{"a", "b"}},
		{"node[1-2]", []string{"node1", "node2"}},
		{"gpu[01-03,07],login1", []string{"gpu01", "gpu02", "gpu03", "gpu07", "login1"}},
		{"n[1-2]-ib[3-4]", []string{"n1-ib3", "n1-ib4", "n2-ib3", "n2-ib4"}},
		{"gpu[08-11]", []string{"gpu08", "gpu09", "gpu10", "gpu11"}},
		{"x[009-011]", []string{"x009", "x010", "x011"}},
		{"x[8-11]", []string{"x8", "x9", "x10", "x11"}},
		{"x[1-010]", []string{"x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10"}},
		{"x[010-011]", []string{"x010", "x011"}},
		{"c[5]", []string{"c5"}},
		{"c[05]", []string{"c05"}},
		{"c[0]", []string{"c0"}},
		{"c[7-7]", []string{"c7"}},
		{"n[1-3,7,10-11]", []string{"n1", "n2", "n3", "n7", "n10", "n11"}},
		{"n[3,1]", []string{"n3", "n1"}},
		{"[1-3]", []string{"1", "2", "3"}},
		{"r[1-2]n[1-2]x", []string{"r1n1x", "r1n2x", "r2n1x", "r2n2x"}},
		{"r[1-2][7,9]", []string{"r17", "r19", "r27", "r29"}},
		{"a[1,2],b[3,4],c", []string{"a1", "a2", "b3", "b4", "c"}},
		{"node-1.example.com,gpu_box", []string{"node-1.example.com", "gpu_box"}},
		{" a , b\t,\nc[1-2] \n", []string{"a", "b", "c1", "c2"}},
		{"a,a,n[1,1]", []string{"a", "a", "n1", "n1"}},
		{"n[18446744073709551614-18446744073709551615]",
			[]string{"n18446744073709551614", "n18446744073709551615"}},
		{"n[00000000000000000000000000000042]", []string{"n00000000000000000000000000000042"}},
		{strings.Repeat("a", 253), []string{strings.Repeat("a", 253)}},
		{strings.Repeat("a", 250) + "[098-100]",
			[]string{strings.Repeat("a", 250) + "098", strings.Repeat("a", 250) + "099", strings.Repeat("a", 250) + "100"}},
	}
	for _, tt := range tests {
		got, err := ExpandHostlist(tt.in)
		if err != nil {
			t.Errorf("ExpandHostlist(%q): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ExpandHostlist(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestExpandHostlistErrors checks that each kind of bad hostlist gets its own
// clear, clipped error.
func TestExpandHostlistErrors(t *testing.T) {
	long := strings.Repeat("z", 500)
	tests := []struct {
		in   string
		want []string // substrings of the message
	}{
		{"", []string{"empty hostlist"}},
		{" \t\n", []string{"empty hostlist"}},
		{"a,,b", []string{`item 2 ""`, "empty item"}},
		{"a,", []string{`item 2 ""`, "empty item"}},
		{",a", []string{`item 1 ""`, "empty item"}},
		{"a, ,b", []string{`item 2 ""`, "empty item"}},
		{"n[1-2", []string{`item 1 "n[1-2"`, "'[' without ']'"}},
		{"n[1,2", []string{`item 1 "n[1,2"`, "'[' without ']'"}},
		{"n1-2]", []string{`"n1-2]"`, "']' without '['"}},
		{"a,n[1]]", []string{`item 2 "n[1]]"`, "']' without '['"}},
		{"n[1[2]]", []string{`"n[1[2]]"`, "nested '['"}},
		{"n[[1]]", []string{"nested '['"}},
		{"n[]", []string{`"n[]"`, "empty brackets"}},
		{"n[1,]", []string{"empty range"}},
		{"n[,1]", []string{"empty range"}},
		{"n[1,,2]", []string{"empty range"}},
		{"n[-3]", []string{`range "-3" has an empty bound`}},
		{"n[3-]", []string{`range "3-" has an empty bound`}},
		{"n[a-3]", []string{`range "a-3": bound "a" is not a decimal number`}},
		{"n[1-b]", []string{`bound "b" is not a decimal number`}},
		{"n[1-2-3]", []string{`bound "2-3" is not a decimal number`}},
		{"n[+1]", []string{`bound "+1" is not a decimal number`}},
		{"n[1, 2]", []string{`bound " 2" is not a decimal number`}},
		{"n[0x1]", []string{"not a decimal number"}},
		{"n[3-1]", []string{`item 1 "n[3-1]"`, `range "3-1" is reversed (3 > 1)`}},
		{"n[10-09]", []string{"is reversed (10 > 9)"}},
		{"n[18446744073709551616]", []string{"bound 18446744073709551616 overflows 64 bits"}},
		{"n[1-99999999999999999999999]", []string{"overflows 64 bits"}},
		{"n[0-65536]", []string{`range "0-65536" holds more than 65536 numbers`}},
		{"n[0-18446744073709551615]", []string{"holds more than 65536 numbers"}},
		{"n[0-40000,0-40000]", []string{`brackets "[0-40000,0-40000]" hold more than 65536 numbers`}},
		{"n[0-40000,0-40000,\n]", []string{`brackets "[0-40000,0-40000,\n]" hold`}},
		{"n[0-300][0-300]", []string{`item 1 "n[0-300][0-300]"`, "expands to more than 65536 names"}},
		{"a[0-40000],b[0-40000]", []string{`hostlist "a[0-40000],b[0-40000]" expands to more than 65536 names`}},
		{"a b", []string{`"a b"`, `character ' '`}},
		{"a:1", []string{`character ':'`}},
		{"user@host", []string{`character '@'`}},
		{"h\u00e9", []string{"not allowed"}},
		{"-oProxyCommand=x", []string{"must not start with \"-\""}},
		{".a", []string{"must not start with \".\""}},
		{strings.Repeat("a", 254), []string{"longer than 253 bytes"}},
		{strings.Repeat("a", 251) + "[099-100]", []string{"longer than 253 bytes"}},
		{strings.Repeat("[1]", 254), []string{"longer than 253 bytes"}},
		{"n[" + long + "]", []string{`"` + long[:maxQuoted] + `..."`}},
		{"n[1-" + long + "]", []string{`bound "` + long[:maxQuoted] + `..."`}},
	}
	for _, tt := range tests {
		got, err := ExpandHostlist(tt.in)
		if err == nil {
			t.Errorf("ExpandHostlist(%q) = %q, no error", tt.in, got)
			continue
		}
		checkSlurmError(t, "ExpandHostlist", tt.in, err, tt.want)
	}
}

// checkSlurmError checks that err, returned by function fn for input in,
// wraps ErrHostlist, is one line with the package prefix, quotes at most a
// clipped part of in, and contains each of want.
func checkSlurmError(t *testing.T, fn, in string, err error, want []string) {
	t.Helper()
	msg := err.Error()
	if !errors.Is(err, ErrHostlist) || !strings.HasPrefix(msg, "jobenv: ") || strings.Contains(msg, "\n") {
		t.Errorf("%s(%q): badly formed error %q", fn, in, msg)
	}
	if len(msg) > maxSlurmErrorLen {
		t.Errorf("%s(%q): error of %d bytes, want at most %d", fn, in, len(msg), maxSlurmErrorLen)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s(%q) error %q does not contain %q", fn, in, msg, w)
		}
	}
}

// maxSlurmErrorLen bounds an error message from the Slurm parsers: a few
// clipped quotes (each at most 4 bytes per input byte) and some words.
const maxSlurmErrorLen = 3*(4*maxQuoted+8) + 200

// TestExpandHostlistLimit checks that exactly 65536 names are accepted and one
// more is refused, however the expression is built.
func TestExpandHostlistLimit(t *testing.T) {
	for _, in := range []string{"n[0-65535]", "n[1-256][1-256]", "a[0-32767],b[0-32767]", "n[1-2]" + strings.Repeat("[1-2]", 15)} {
		names, err := ExpandHostlist(in)
		if err != nil || len(names) != maxSlurmNodes {
			t.Errorf("ExpandHostlist(%q): %d names, %v; want %d", in, len(names), err, maxSlurmNodes)
		}
	}
	for _, in := range []string{"n[0-65536]", "n[1-256][1-257]", "a[0-32767],b[0-32767],c", "n[1-2]" + strings.Repeat("[1-2]", 16)} {
		if _, err := ExpandHostlist(in); !errors.Is(err, ErrHostlist) || !strings.Contains(err.Error(), "more than 65536") {
			t.Errorf("ExpandHostlist(%q) = %v, want a more-than-65536 error", in, err)
		}
	}
	names, err := ExpandHostlist("n[0-65535]")
	if err == nil && (names[0] != "n0" || names[65535] != "n65535") {
		t.Errorf("ExpandHostlist(n[0-65535]) runs %q..%q", names[0], names[65535])
	}
}

// TestExpandTasksPerNode checks expansions of valid compressed per-node count
// lists.
func TestExpandTasksPerNode(t *testing.T) {
	tests := []struct {
		in   string
		want []int
	}{
		{"1", []int{1}},
		{"4", []int{4}},
		{"2(x3),1", []int{2, 2, 2, 1}},
		{"2(x3)", []int{2, 2, 2}},
		{"1,2,3", []int{1, 2, 3}},
		{"8(x1)", []int{8}},
		{"4(x2),2,3(x2)", []int{4, 4, 2, 3, 3}},
		{" 2(x2) ,\t1\n", []int{2, 2, 1}},
		{"007(x02)", []int{7, 7}},
		{"65536", []int{hostlist.MaxSlotsPerHost}},
	}
	for _, tt := range tests {
		got, err := ExpandTasksPerNode(tt.in)
		if err != nil {
			t.Errorf("ExpandTasksPerNode(%q): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ExpandTasksPerNode(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestExpandTasksPerNodeErrors checks that each kind of bad per-node count
// list gets its own clear, clipped error.
func TestExpandTasksPerNodeErrors(t *testing.T) {
	long := strings.Repeat("9", 500)
	tests := []struct {
		in   string
		want []string
	}{
		{"", []string{"empty per-node count list"}},
		{"  ", []string{"empty per-node count list"}},
		{"1,,2", []string{`item 2 ""`, "empty item"}},
		{"1,", []string{`item 2 ""`, "empty item"}},
		{"0", []string{`item 1 "0"`, "count must be at least 1"}},
		{"-1", []string{`count "-1" is not a positive integer`}},
		{"+1", []string{`count "+1" is not a positive integer`}},
		{"x", []string{`count "x" is not a positive integer`}},
		{"1.5", []string{`count "1.5" is not a positive integer`}},
		{"2 (x3)", []string{`count "2 " is not a positive integer`}},
		{"65537", []string{"count 65537 exceeds the limit of 65536"}},
		{"99999999999999999999999", []string{"exceeds the limit"}},
		{"(x3)", []string{"missing count"}},
		{"2(x0)", []string{`item 1 "2(x0)"`, "repeat count must be at least 1"}},
		{"2(x-1)", []string{`repeat count "-1" is not a positive integer`}},
		{"2(x)", []string{"missing repeat count"}},
		{"2(3)", []string{`want "N" or "N(xM)"`}},
		{"2(x3", []string{`want "N" or "N(xM)"`}},
		{"2(x3))", []string{`repeat count "3)" is not a positive integer`}},
		{"2(x3)x", []string{`want "N" or "N(xM)"`}},
		{"2(*3)", []string{`want "N" or "N(xM)"`}},
		{"2(x65537)", []string{"repeat count 65537 exceeds the limit of 65536"}},
		{"1(x65536),1", []string{`per-node counts "1(x65536),1" cover more than 65536 nodes`}},
		{strings.Repeat("1,", maxSlurmNodes) + "1", []string{"cover more than 65536 nodes", "..."}},
		{long, []string{"count " + long[:maxQuoted] + "... exceeds"}},
	}
	for _, tt := range tests {
		got, err := ExpandTasksPerNode(tt.in)
		if err == nil {
			t.Errorf("ExpandTasksPerNode(%q) = %v, no error", clip(tt.in, maxQuoted), got)
			continue
		}
		checkSlurmError(t, "ExpandTasksPerNode", clip(tt.in, maxQuoted), err, tt.want)
	}
}

// TestExpandTasksPerNodeLimit checks that counts for exactly 65536 nodes are
// accepted.
func TestExpandTasksPerNodeLimit(t *testing.T) {
	for _, in := range []string{"1(x65536)", "2(x65535),1", "3(x32768),4(x32768)"} {
		counts, err := ExpandTasksPerNode(in)
		if err != nil || len(counts) != maxSlurmNodes {
			t.Errorf("ExpandTasksPerNode(%q): %d counts, %v; want %d", in, len(counts), err, maxSlurmNodes)
		}
	}
}

// TestCompressHostlist checks the test-only compressors that the fuzz tests
// use for round trips.
func TestCompressHostlist(t *testing.T) {
	tests := []struct {
		names []string
		want  string
	}{
		{[]string{"gpu01", "gpu02", "gpu03", "gpu07", "login1"}, "gpu[01-03,07],login1"},
		{[]string{"n8", "n9", "n10", "n11"}, "n[8-11]"},
		{[]string{"x009", "x010", "x011"}, "x[009-011]"},
		{[]string{"x09", "x010"}, "x[09,010]"},
		{[]string{"a", "b", "a"}, "a,b,a"},
		{[]string{"n1", "n1", "n2"}, "n[1,1-2]"},
		{[]string{"1", "2"}, "[1-2]"},
		{[]string{"n1-ib3", "n1-ib4"}, "n1-ib[3-4]"},
	}
	for _, tt := range tests {
		if got := compressHostlist(tt.names); got != tt.want {
			t.Errorf("compressHostlist(%q) = %q, want %q", tt.names, got, tt.want)
		}
		back, err := ExpandHostlist(tt.want)
		if err != nil || !reflect.DeepEqual(back, tt.names) {
			t.Errorf("ExpandHostlist(%q) = %q, %v; want %q", tt.want, back, err, tt.names)
		}
	}
	if got := compressCounts([]int{2, 2, 2, 1, 3, 3}); got != "2(x3),1,3(x2)" {
		t.Errorf("compressCounts = %q", got)
	}
}

// compressHostlist writes names as a hostlist expression that ExpandHostlist
// expands back to names: consecutive names that share a prefix and end in
// digits go in one bracket, with runs of consecutive numbers of the same
// width as "lo-hi". A name alone in its group is written as is.
func compressHostlist(names []string) string {
	var items []string
	for i := 0; i < len(names); {
		prefix, _, ok := splitNumberSuffix(names[i])
		j := i + 1
		for ok && j < len(names) {
			p, _, ok2 := splitNumberSuffix(names[j])
			if !ok2 || p != prefix {
				break
			}
			j++
		}
		if j == i+1 {
			items = append(items, names[i])
		} else {
			items = append(items, prefix+"["+compressNumbers(names[i:j], len(prefix))+"]")
		}
		i = j
	}
	return strings.Join(items, ",")
}

// compressNumbers writes the numeric suffixes (after cut bytes) of names as
// the inside of a hostlist bracket, "01-03,07".
func compressNumbers(names []string, cut int) string {
	var ranges []string
	for i := 0; i < len(names); {
		lo := names[i][cut:]
		v, _ := strconv.ParseUint(lo, 10, 64)
		j := i + 1
		for ; j < len(names) && names[j][cut:] == padNumber(v+uint64(j-i), len(lo)); j++ {
		}
		if j == i+1 {
			ranges = append(ranges, lo)
		} else {
			ranges = append(ranges, lo+"-"+names[j-1][cut:])
		}
		i = j
	}
	return strings.Join(ranges, ",")
}

// splitNumberSuffix splits name into a prefix and a trailing run of 1 to 18
// digits; ok is false when name has no such suffix.
func splitNumberSuffix(name string) (prefix, digits string, ok bool) {
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	if n := len(name) - i; n == 0 || n > 18 {
		return name, "", false
	}
	return name[:i], name[i:], true
}

// compressCounts writes counts in Slurm's compressed form, "2(x3),1".
func compressCounts(counts []int) string {
	var items []string
	for i := 0; i < len(counts); {
		j := i + 1
		for j < len(counts) && counts[j] == counts[i] {
			j++
		}
		item := strconv.Itoa(counts[i])
		if j > i+1 {
			item += fmt.Sprintf("(x%d)", j-i)
		}
		items = append(items, item)
		i = j
	}
	return strings.Join(items, ",")
}
