package settings

import "testing"

// TestCheckCongestion: Linux's congestion control names pass, and so do
// "" (gorovod's choice) and HostCongestion; names with other characters
// or longer than 15 fail, through the knob's variable too, which then
// keeps its value.
func TestCheckCongestion(t *testing.T) {
	for _, ok := range []string{"", HostCongestion, "reno", "cubic", "bbr", "dctcp", "highspeed", "bbr2", "abcdefghijklmno"} {
		if err := CheckCongestion(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"Reno", "bbr-2", "reno cubic", "abcdefghijklmnop", "é", "../x"} {
		if err := CheckCongestion(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	k := Knobs{TCPCongestion: "cubic"}
	v := congestionValue{&k.TCPCongestion}
	if err := v.Set("Bad!"); err == nil || k.TCPCongestion != "cubic" {
		t.Errorf("Set(Bad!): %v, value %q", err, k.TCPCongestion)
	}
	if err := v.Set("reno"); err != nil || v.String() != "reno" {
		t.Errorf("Set(reno): %v, value %q", err, v.String())
	}
}
