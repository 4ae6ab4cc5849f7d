package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// ErrDiscovery reports a host discovery script that failed or printed
// something that is not a host list.
var ErrDiscovery = errors.New("runner: host discovery")

// discoveryTimeout bounds one run of the discovery script.
const discoveryTimeout = 10 * time.Second

// DiscoverHosts runs the host discovery script (gorun
// --host-discovery-script) and parses what it prints: one host per line,
// "host:slots" or a bare "host" (slotsPerHost slots), blank lines and #
// comments ignored. No hosts at all is a valid answer. A non-zero exit,
// a line that is not a host, or a host listed twice is an error that
// wraps ErrDiscovery and quotes the script's output.
func DiscoverHosts(ctx context.Context, script string, slotsPerHost int) ([]Host, error) {
	ctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v; it printed %q and on stderr %q", ErrDiscovery, script, err,
			clip(stdout.String(), 200), clip(stderr.String(), 200))
	}
	return parseDiscovered(stdout.String(), slotsPerHost, script)
}

// parseDiscovered parses a discovery script's output (see DiscoverHosts).
func parseDiscovered(out string, slotsPerHost int, script string) ([]Host, error) {
	var hosts []Host
	seen := map[string]int{}
	for i, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		h, err := parseHostItem(line)
		if err != nil {
			return nil, fmt.Errorf("%w: %s, line %d %q: %v", ErrDiscovery, script, i+1, clip(line, maxQuoted), err)
		}
		if !hasSlotCount(line) {
			h.Slots = max(slotsPerHost, 1)
		}
		if j, dup := seen[hostKey(h.Name)]; dup {
			return nil, fmt.Errorf("%w: %s, line %d: host %q is also on line %d", ErrDiscovery, script, i+1, h.Name, j)
		}
		seen[hostKey(h.Name)] = i + 1
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// hasSlotCount reports whether a host item names its slots ("h:2",
// "[v6]:2").
func hasSlotCount(item string) bool {
	if strings.HasPrefix(item, "[") {
		return strings.Contains(item, "]:")
	}
	return strings.Contains(item, ":")
}
