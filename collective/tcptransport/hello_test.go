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

func TestCheckLaneHello(t *testing.T) {
	cases := []struct {
		hello          []byte
		wantRank       int
		wantLane       lane
		wantErrMention string
	}{
		// Received by rank 1 of 4 from ranks in [2, 4).
		{laneHello(3, 4, 3, 1), 3, laneIn, ""},
		{laneHello(3, 4, 1, 3), 3, laneOut, ""},
		{laneHello(3, 4, 3, 2), 0, 0, "opens lane 3>2"},
		{laneHello(3, 4, 3, 3), 0, 0, "opens lane 3>3"},
		{laneHello(3, 5, 3, 1), 0, 0, "job of 5 ranks"},
		{laneHello(1, 4, 1, 1), 0, 0, "claims rank 1"},
		{hello(3, 4), 0, 0, "malformed"},
		{[]byte("gorovod-data rank=3 size=4 lane=3>01"), 0, 0, "malformed"},
		{[]byte("gorovod-data rank=3 size=4 lane=3>1 "), 0, 0, "malformed"},
	}
	for _, c := range cases {
		r, l, err := checkLaneHello(c.hello, 1, 4, 2, 4)
		switch {
		case c.wantErrMention == "" && (err != nil || r != c.wantRank || l != c.wantLane):
			t.Errorf("checkLaneHello(%q) = %d, %d, %v; want %d, %d", c.hello, r, l, err, c.wantRank, c.wantLane)
		case c.wantErrMention != "" && (err == nil || !strings.Contains(err.Error(), c.wantErrMention)):
			t.Errorf("checkLaneHello(%q) err = %v; want one mentioning %q", c.hello, err, c.wantErrMention)
		}
	}
}
