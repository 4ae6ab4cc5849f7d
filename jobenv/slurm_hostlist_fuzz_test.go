package jobenv

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/internal/hostlist"
)

// FuzzExpandHostlist checks that ExpandHostlist never panics, returns
// well-formed errors, stays within the size bound, returns valid host names,
// and reads back its output both compressed and as a plain list.
func FuzzExpandHostlist(f *testing.F) {
	for _, s := range []string{
		"a", "a,b", "node[1-2]", "gpu[01-03,07],login1", "n[1-2]-ib[3-4]", "gpu[08-11]",
		"x[009-011]", "x[1-010]", "r[1-2][7,9]", " a , b ", "a,,b", "n[1-2", "n]", "n[1[2]]",
		"n[]", "n[1,]", "n[a-3]", "n[3-1]", "n[0-65535]", "n[0-65536]", "n[1-256][1-257]",
		"n[18446744073709551615]", "n[18446744073709551616]", "-a", "a b", "[1]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, err := ExpandHostlist(s)
		if err != nil {
			checkSlurmError(t, "ExpandHostlist", s, err, nil)
			return
		}
		if len(names) == 0 || len(names) > maxSlurmNodes {
			t.Fatalf("ExpandHostlist(%q) returned %d names", s, len(names))
		}
		for _, name := range names {
			if got, err := hostlist.ParseName(name, false); err != nil || got != name {
				t.Fatalf("ExpandHostlist(%q) returned bad host name %q: %v", s, name, err)
			}
		}
		for _, expr := range []string{compressHostlist(names), strings.Join(names, ",")} {
			if again, err := ExpandHostlist(expr); err != nil || !reflect.DeepEqual(again, names) {
				t.Fatalf("ExpandHostlist(%q) = %q; re-expanded %q = %q, %v", s, names, expr, again, err)
			}
		}
	})
}

// FuzzExpandTasksPerNode checks that ExpandTasksPerNode never panics, returns
// well-formed errors, stays within the bounds, and reads back its output both
// compressed and as a plain list.
func FuzzExpandTasksPerNode(f *testing.F) {
	for _, s := range []string{
		"1", "2(x3),1", "4(x2),2,3(x2)", " 2(x2) , 1 ", "0", "-1", "2(x0)", "2(x3", "2(3)",
		"1,,2", "65536", "65537", "1(x65536)", "1(x65536),1", "99999999999999999999(x1)",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		counts, err := ExpandTasksPerNode(s)
		if err != nil {
			checkSlurmError(t, "ExpandTasksPerNode", s, err, nil)
			return
		}
		if len(counts) == 0 || len(counts) > maxSlurmNodes {
			t.Fatalf("ExpandTasksPerNode(%q) returned %d counts", s, len(counts))
		}
		items := make([]string, len(counts))
		for i, n := range counts {
			if n < 1 || n > hostlist.MaxSlotsPerHost {
				t.Fatalf("ExpandTasksPerNode(%q) returned count %d", s, n)
			}
			items[i] = strconv.Itoa(n)
		}
		for _, list := range []string{compressCounts(counts), strings.Join(items, ",")} {
			if again, err := ExpandTasksPerNode(list); err != nil || !reflect.DeepEqual(again, counts) {
				t.Fatalf("ExpandTasksPerNode(%q) = %v; re-expanded %q = %v, %v", s, counts, list, again, err)
			}
		}
	})
}
