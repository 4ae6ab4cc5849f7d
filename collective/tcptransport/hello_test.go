package tcptransport

import (
	"strings"
	"testing"
)

func TestParseHello(t *testing.T) {
	if r, n, err := parseHello(hello(3, 8)); err != nil || r != 3 || n != 8 {
		t.Errorf("parseHello(hello(3, 8)) = %d, %d, %v", r, n, err)
	}
	for _, bad := range []string{
		"", "gorovod-data", "gorovod-data rank=1", "gorovod-data rank=1 size=2 extra",
		"gorovod-data rank=+1 size=2", "gorovod-data rank=01 size=2", "gorovod-data  rank=1 size=2",
		"gorovod-ctl rank=1 size=2", "gorovod-data rank=x size=2",
	} {
		if _, _, err := parseHello([]byte(bad)); err == nil {
			t.Errorf("parseHello(%q) accepted", bad)
		}
	}
}

func TestCheckHello(t *testing.T) {
	cases := []struct {
		hello          []byte
		size, lo, hi   int
		wantRank       int
		wantErrMention string
	}{
		{hello(2, 4), 4, 1, 4, 2, ""},
		{hello(2, 5), 4, 1, 4, 0, "job of 5 ranks"},
		{hello(7, 4), 4, 1, 4, 0, "rank 7"},
		{hello(0, 4), 4, 1, 4, 0, "rank 0"},
		{hello(-1, 4), 4, 1, 4, 0, "rank -1"},
		{[]byte("junk"), 4, 1, 4, 0, "malformed"},
	}
	for _, c := range cases {
		r, err := checkHello(c.hello, c.size, c.lo, c.hi)
		switch {
		case c.wantErrMention == "" && (err != nil || r != c.wantRank):
			t.Errorf("checkHello(%q) = %d, %v; want %d", c.hello, r, err, c.wantRank)
		case c.wantErrMention != "" && (err == nil || !strings.Contains(err.Error(), c.wantErrMention)):
			t.Errorf("checkHello(%q) err = %v; want one mentioning %q", c.hello, err, c.wantErrMention)
		}
	}
}
