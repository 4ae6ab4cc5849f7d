package settings

import "fmt"

// HostCongestion is the value of Knobs.TCPCongestion that keeps each
// host's default congestion control on the links between hosts, where ""
// means gorovod's choice (Reno; see package collective/tcptransport). No
// Linux congestion control has this name.
const HostCongestion = "host"

// CheckCongestion reports what is wrong with name as the name of a Linux
// TCP congestion control (Knobs.TCPCongestion): at most 15 of the
// characters a-z, 0-9 and _; "" (gorovod's choice) and HostCongestion are
// fine. Whether the kernel has it is found out when a link is made.
func CheckCongestion(name string) error {
	if len(name) > 15 {
		return fmt.Errorf("congestion control %q: longer than 15 characters", name)
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return fmt.Errorf("congestion control %q: want lower-case letters, digits and _", name)
		}
	}
	return nil
}

// congestionValue is the tcp-congestion knob: a name CheckCongestion
// takes.
type congestionValue struct{ p *string }

func (v congestionValue) String() string { return *v.p }

func (v congestionValue) Set(s string) error {
	if err := CheckCongestion(s); err != nil {
		return err
	}
	*v.p = s
	return nil
}
