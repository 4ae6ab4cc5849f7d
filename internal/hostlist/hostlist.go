package hostlist

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// MaxSlotsPerHost bounds the slot count of one host, so that slot totals
// cannot overflow and a typo such as "host:40000000" is caught early.
const MaxSlotsPerHost = 1 << 16

// MaxNameLen is the longest DNS name (RFC 1035) accepted as a host.
const MaxNameLen = 253

// Host is one machine of the job and the number of ranks it may run.
type Host struct {
	// Name is a DNS name, an IPv4 address or an IPv6 address (without
	// brackets, in canonical form, optionally with a %zone).
	Name string
	// Slots is how many ranks the host can take; always > 0 from the parsers.
	Slots int
}

// String formats h in the -H form, "name:slots", with an IPv6 address in
// brackets: "node1:4", "[::1]:2".
func (h Host) String() string {
	return Literal(h.Name) + ":" + strconv.Itoa(h.Slots)
}

// Format formats hosts as a -H list, "a:2,b:4"; Parse reads it back.
func Format(hosts []Host) string {
	items := make([]string, len(hosts))
	for i, h := range hosts {
		items[i] = h.String()
	}
	return strings.Join(items, ",")
}

// Parse parses the -H form "host1:2,host2:4". A bare "host" has one
// slot; an IPv6 address goes in brackets ("[::1]:2"); spaces around items are
// ignored. An empty item, a bad host name, a slot count that is not a
// positive integer, or a host listed twice is an error naming the item.
func Parse(s string) ([]Host, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: no hosts given", ErrHosts)
	}
	items := strings.Split(s, ",")
	hosts := make([]Host, 0, len(items))
	seen := make(map[string]int, len(items)) // host key → item index
	for i, item := range items {
		item = strings.TrimSpace(item)
		h, err := ParseItem(item)
		if err != nil {
			return nil, fmt.Errorf("%w: item %d %q: %w", ErrHosts, i+1, clip(item, maxQuoted), err)
		}
		if j, dup := seen[Key(h.Name)]; dup {
			return nil, fmt.Errorf("%w: item %d %q: duplicate host %q (also item %d)",
				ErrHosts, i+1, clip(item, maxQuoted), h.Name, j+1)
		}
		seen[Key(h.Name)] = i
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// ParseItem parses one trimmed -H item: "host", "host:N", "[v6]" or "[v6]:N".
func ParseItem(item string) (Host, error) {
	if item == "" {
		return Host{}, errors.New("empty item")
	}
	name, slots, hasSlots := item, "", false
	if strings.HasPrefix(item, "[") {
		end := strings.IndexByte(item, ']')
		if end < 0 {
			return Host{}, errors.New("missing ']' after IPv6 address")
		}
		name, slots = item[:end+1], item[end+1:]
		if slots != "" {
			if slots[0] != ':' {
				return Host{}, errors.New("expected ':' after ']'")
			}
			slots, hasSlots = slots[1:], true
		}
	} else if i := strings.LastIndexByte(item, ':'); i >= 0 {
		name, slots, hasSlots = item[:i], item[i+1:], true
	}
	host, err := ParseName(name, false)
	if err != nil {
		return Host{}, err
	}
	n := 1
	if hasSlots {
		if n, err = ParseSlots(slots); err != nil {
			return Host{}, err
		}
	}
	return Host{Name: host, Slots: n}, nil
}

// ParseSlots parses a slot count: decimal digits, 1..MaxSlotsPerHost.
func ParseSlots(s string) (int, error) {
	if s == "" {
		return 0, errors.New("missing slot count")
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("slot count %q is not a positive integer", clip(s, maxQuoted))
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > MaxSlotsPerHost {
		return 0, fmt.Errorf("slot count %s exceeds the limit of %d", clip(s, maxQuoted), MaxSlotsPerHost)
	}
	if n == 0 {
		return 0, errors.New("slot count must be at least 1")
	}
	return n, nil
}

// ParseName checks a host token and returns its canonical name: a DNS
// name or IPv4 address as written, or an IPv6 address without brackets in
// canonical form. A bare (unbracketed) IPv6 address is accepted only when
// bareIPv6 is set, since in the -H form its colons would be ambiguous.
func ParseName(s string, bareIPv6 bool) (string, error) {
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		return parseIPv6(s[1 : len(s)-1])
	}
	if bareIPv6 && strings.Count(s, ":") >= 2 {
		return parseIPv6(s)
	}
	switch {
	case s == "":
		return "", errors.New("empty host name")
	case len(s) > MaxNameLen:
		return "", fmt.Errorf("host name longer than %d bytes", MaxNameLen)
	case s[0] == '-' || s[0] == '.':
		return "", fmt.Errorf("host name %q must not start with %q", clip(s, maxQuoted), s[:1])
	}
	for _, c := range []byte(s) {
		if !IsNameByte(c) {
			return "", badHostChar(s, c)
		}
	}
	return s, nil
}

// badHostChar explains a host name holding a byte that no host name has.
func badHostChar(s string, c byte) error {
	if c == ':' {
		return fmt.Errorf("bad host name %q (an IPv6 address goes in brackets: [::1]:2)", clip(s, maxQuoted))
	}
	return fmt.Errorf("bad host name %q: character %q is not allowed", clip(s, maxQuoted), rune(c))
}

// parseIPv6 checks an IPv6 address (optionally with a %zone made of host-name
// characters) and returns its canonical form.
func parseIPv6(s string) (string, error) {
	addr, err := netip.ParseAddr(s)
	if err != nil || !addr.Is6() {
		return "", fmt.Errorf("%q is not an IPv6 address", clip(s, maxQuoted))
	}
	for _, c := range []byte(addr.Zone()) {
		if !IsNameByte(c) {
			return "", fmt.Errorf("IPv6 zone %q: character %q is not allowed", addr.Zone(), rune(c))
		}
	}
	return addr.String(), nil
}

// IsNameByte reports whether c may appear in a host name: ASCII letters,
// digits, '-', '.', and '_' (common in container and cluster names).
func IsNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_'
}

// Literal returns name as it is written in a -H list or hostfile:
// IPv6 addresses in brackets, everything else as is.
func Literal(name string) string {
	if strings.Contains(name, ":") {
		return "[" + name + "]"
	}
	return name
}

// Key is the identity of a host name for duplicate detection: DNS names
// are case-insensitive, and IPv6 names are already canonical.
func Key(name string) string { return strings.ToLower(name) }

// ErrHosts reports a malformed -H host list: an empty item, a bad host
// name, a slot count that is not a positive integer, or a duplicate host.
// It is runner.ErrHosts, and its text keeps runner's prefix, the package
// through which gorun's users meet it.
var ErrHosts = errors.New("runner: bad -H host list")

// maxQuoted bounds how much of a user's input an error message repeats.
const maxQuoted = 120

// clip shortens s to at most n bytes, marking the cut with "...".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
