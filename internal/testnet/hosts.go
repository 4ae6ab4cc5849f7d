package testnet

import (
	"fmt"
	"os"
	"strings"
)

// HostsFile returns a hosts file for the instance, to bind-mount over
// /etc/hosts in private mount namespaces: the machine's localhost lines,
// the bridge's address as bridgeNames and as the machine's short host name
// (where it does not clash with a name of the instance), and every node by
// its name.
func (n *Net) HostsFile(bridgeNames ...string) string {
	ours := map[string]bool{}
	for _, name := range bridgeNames {
		ours[name] = true
	}
	for _, node := range n.Nodes {
		ours[node.Name] = true
	}
	var b strings.Builder
	if data, err := os.ReadFile("/etc/hosts"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if kept := localhostLine(line, ours); kept != "" {
				b.WriteString(kept + "\n")
			}
		}
	}
	if b.Len() == 0 {
		b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	}
	names := strings.Join(bridgeNames, " ")
	if host, err := os.Hostname(); err == nil {
		host, _, _ = strings.Cut(host, ".")
		if host != "" && host != "localhost" && !ours[host] {
			names = strings.TrimSpace(names + " " + host)
		}
	}
	if names != "" {
		fmt.Fprintf(&b, "%s\t%s\n", n.BridgeAddr, names)
	}
	for _, node := range n.Nodes {
		fmt.Fprintf(&b, "%s\t%s\n", node.Addr, node.Name)
	}
	return b.String()
}

// NSSwitch returns the machine's nsswitch.conf with its hosts line
// replaced by "hosts: files": names resolve from the hosts file only, never
// through DNS, which the nodes cannot reach.
func NSSwitch() string {
	var b strings.Builder
	data, _ := os.ReadFile("/etc/nsswitch.conf")
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "hosts:") && line != "" {
			b.WriteString(line + "\n")
		}
	}
	b.WriteString("hosts: files\n")
	return b.String()
}

// localhostLine returns line, a line of /etc/hosts, when it names localhost
// or an ip6- name and none of ours, and "" otherwise.
func localhostLine(line string, ours map[string]bool) string {
	fields := strings.Fields(line)
	if len(fields) < 2 || strings.HasPrefix(fields[0], "#") {
		return ""
	}
	keep := false
	for _, name := range fields[1:] {
		if strings.HasPrefix(name, "#") {
			break
		}
		if ours[name] {
			return ""
		}
		if strings.Contains(name, "localhost") || strings.HasPrefix(name, "ip6-") {
			keep = true
		}
	}
	if !keep {
		return ""
	}
	return strings.Join(fields, " ")
}
