package runner

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gorovod/gorovod/internal/hostlist"
)

// MaxSlotsPerHost bounds the slot count of one host, so that slot totals
// cannot overflow and a typo such as "host:40000000" is caught early.
const MaxSlotsPerHost = hostlist.MaxSlotsPerHost

// Host is one machine of the job and the number of ranks it may run.
// (It has the fields of hostlist.Host, which parses it.)
type Host struct {
	// Name is a DNS name, an IPv4 address or an IPv6 address (without
	// brackets, in canonical form, optionally with a %zone).
	Name string
	// Slots is how many ranks the host can take; always > 0 from the parsers.
	Slots int
}

// String formats h in the -H form, "name:slots", with an IPv6 address in
// brackets: "node1:4", "[::1]:2".
func (h Host) String() string { return hostlist.Host(h).String() }

// FormatHosts formats hosts as a -H list, "a:2,b:4"; ParseHosts reads it back.
func FormatHosts(hosts []Host) string {
	items := make([]string, len(hosts))
	for i, h := range hosts {
		items[i] = h.String()
	}
	return strings.Join(items, ",")
}

// TotalSlots returns the sum of the hosts' slot counts.
func TotalSlots(hosts []Host) int {
	n := 0
	for _, h := range hosts {
		n += h.Slots
	}
	return n
}

// ParseHosts parses the -H form "host1:2,host2:4". A bare "host" has one
// slot; an IPv6 address goes in brackets ("[::1]:2"); spaces around items are
// ignored. An empty item, a bad host name, a slot count that is not a
// positive integer, or a host listed twice is an error wrapping ErrHosts
// that names the item.
func ParseHosts(s string) ([]Host, error) {
	parsed, err := hostlist.Parse(s)
	if err != nil {
		return nil, err
	}
	hosts := make([]Host, len(parsed))
	for i, h := range parsed {
		hosts[i] = Host(h)
	}
	return hosts, nil
}

// checkLocalAliases reports hosts that name this machine more than once
// under different names ("localhost", "127.0.0.1", "::1", its host name;
// see IsLocalHost). Such a list would place two sets of ranks on one
// machine, each numbering its local ranks from 0, so two ranks would pin
// the same GPU; the error shows the one item to write instead.
func checkLocalAliases(hosts []Host) error {
	var local []Host
	for _, h := range hosts {
		if IsLocalHost(h.Name) {
			local = append(local, h)
		}
	}
	if len(local) < 2 {
		return nil
	}
	names := make([]string, len(local))
	for i, h := range local {
		names[i] = strconv.Quote(h.Name)
	}
	list, all := strings.Join(names[:len(names)-1], ", ")+" and "+names[len(names)-1], "all"
	if len(local) == 2 {
		all = "both"
	}
	merged := Host{Name: local[0].Name, Slots: TotalSlots(local)}
	return fmt.Errorf("%w: %s %s name this machine; list it once with all its slots (%s)",
		ErrHosts, list, all, merged)
}
