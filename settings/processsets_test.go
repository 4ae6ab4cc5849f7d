package settings

import (
	"reflect"
	"strings"
	"testing"
)

// TestParseProcessSets: lists read back as written, with spaces allowed,
// and FormatProcessSets spells them back; malformed lists are refused.
func TestParseProcessSets(t *testing.T) {
	sets, err := ParseProcessSets(" 0,2 ; 1, 3;0")
	if want := [][]int{{0, 2}, {1, 3}, {0}}; err != nil || !reflect.DeepEqual(sets, want) {
		t.Fatalf("ParseProcessSets = %v, %v; want %v", sets, err, want)
	}
	if got := FormatProcessSets(sets); got != "0,2;1,3;0" {
		t.Errorf("FormatProcessSets = %q", got)
	}
	if sets, err := ParseProcessSets("  "); err != nil || sets != nil {
		t.Errorf("blank: %v, %v; want none", sets, err)
	}
	for _, bad := range []string{"0,2;", ";1", "0,,2", "0,x", "0-3", "1;;2", "-1,2", strings.Repeat("1,", MaxProcessSetsText)} {
		if _, err := ParseProcessSets(bad); err == nil {
			t.Errorf("%.20q accepted", bad)
		}
	}
	var k Knobs
	v := processSetsValue{&k.ProcessSets}
	if err := v.Set("2, 3 ;0"); err != nil || k.ProcessSets != "2,3;0" || v.String() != "2,3;0" {
		t.Errorf("knob set to %q (%v), want the canonical \"2,3;0\"", k.ProcessSets, err)
	}
	if err := v.Set("0;x"); err == nil || k.ProcessSets != "2,3;0" {
		t.Errorf("a bad value was taken: %q, %v", k.ProcessSets, err)
	}
}
