package testnet

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Remove removes what n made, in the reverse order of its making: the veth
// pairs, the namespaces, the directory dir (when not empty) and the bridge
// (when made). The processes in its namespaces must be gone (KillIn). It
// returns what failed.
func (n *Net) Remove(dir string) []error {
	return RemoveNetwork(n.Names, n.ID, n.Bridge, n.NetNSNames(), dir)
}

// RemoveNetwork removes what the instance of names with identifier id
// made, in the reverse order of its making: the veth pairs, the network
// namespaces netns, the directory dir (when not empty) and the bridge (when
// not empty). Its processes must be gone. It returns what failed.
func RemoveNetwork(names Names, id, bridge string, netns []string, dir string) []error {
	var errs []error
	if ifaces, err := net.Interfaces(); err == nil {
		for _, ifc := range ifaces {
			if strings.HasPrefix(ifc.Name, names.Veth+id) {
				if err := run(names.Fixture, "ip", "link", "del", "dev", ifc.Name); err != nil && LinkExists(ifc.Name) {
					errs = append(errs, err)
				}
			}
		}
	}
	for _, ns := range netns {
		if _, err := os.Lstat(filepath.Join("/run/netns", ns)); err != nil {
			continue
		}
		if err := run(names.Fixture, "ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	if dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", names.Fixture, err))
		}
	}
	if bridge != "" && LinkExists(bridge) {
		if err := run(names.Fixture, "ip", "link", "del", "dev", bridge); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Instance is what the machine holds of one instance of a fixture kind.
type Instance struct {
	ID     string
	Owner  string   // the bridge's alias (or else the directory's owner file) after Names.Alias; "" when neither says
	Bridge string   // the bridge's name; "" when there is none
	NetNS  []string // its network namespaces
	Dir    string   // its directory; "" when there is none
	Stale  bool     // what a dead owner left: its owner is dead, or it has links or namespaces but no bridge
}

// List returns the instances of names that the machine holds, sorted by
// identifier. Namespaces and directories are listed before the bridges: a
// live instance makes its bridge first and removes it last, so that all
// that is listed without a bridge is stale.
func List(names Names) []Instance {
	all := map[string]*Instance{}
	get := func(id string) *Instance {
		if all[id] == nil {
			all[id] = &Instance{ID: id}
		}
		return all[id]
	}
	if entries, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range entries {
			rest, ok := strings.CutPrefix(e.Name(), names.NetNS)
			if id, _, ok2 := strings.Cut(rest, "-"); ok && ok2 && IsID(id) {
				get(id).NetNS = append(get(id).NetNS, e.Name())
			}
		}
	}
	if matches, err := filepath.Glob(filepath.Join(os.TempDir(), names.Dir+"*")); err == nil {
		for _, m := range matches {
			if id := strings.TrimPrefix(filepath.Base(m), names.Dir); IsID(id) {
				get(id).Dir = m
			}
		}
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil
	}
	for _, ifc := range ifaces {
		if id, ok := strings.CutPrefix(ifc.Name, names.Bridge); ok && IsID(id) {
			in := get(id)
			in.Bridge = ifc.Name
			alias, _ := os.ReadFile(filepath.Join("/sys/class/net", ifc.Name, "ifalias"))
			if owner, ok := strings.CutPrefix(TrimNL(alias), names.Alias); ok {
				in.Owner = owner
				in.Stale = !OwnerAlive(owner)
			}
		}
	}
	hasVeth := map[string]bool{}
	for _, ifc := range ifaces {
		if rest, ok := strings.CutPrefix(ifc.Name, names.Veth); ok && len(rest) > 6 && IsID(rest[:6]) {
			get(rest[:6])
			hasVeth[rest[:6]] = true
		}
	}
	var list []Instance
	for id, in := range all {
		if in.Bridge == "" {
			if in.Dir != "" {
				owner, err := os.ReadFile(filepath.Join(in.Dir, OwnerFile))
				in.Owner = strings.TrimSpace(string(owner))
				in.Stale = err != nil || !OwnerAlive(in.Owner)
			}
			// A directory of a live owner alone may be one whose bridge
			// is being made; links or namespaces without a bridge are
			// always left over.
			in.Stale = in.Stale || hasVeth[id] || len(in.NetNS) > 0
		}
		list = append(list, *in)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	return list
}

// Kill kills every process in the instance's namespaces and removes it
// (RemoveNetwork), returning what failed.
func (in Instance) Kill(names Names) []error {
	var set []NSID
	for _, ns := range in.NetNS {
		if id, err := NSOfFile(filepath.Join("/run/netns", ns)); err == nil {
			set = append(set, id)
		}
	}
	var errs []error
	if left := KillIn(set); len(left) > 0 {
		errs = append(errs, fmt.Errorf("%s: processes left in %s's namespaces: %v", names.Fixture, in.ID, left))
	}
	return append(errs, RemoveNetwork(names, in.ID, in.Bridge, in.NetNS, in.Dir)...)
}

// CollectStale removes what instances of names whose owners died without
// their cleanups left (see List), logging each with logf.
func CollectStale(names Names, logf func(format string, args ...any)) {
	for _, in := range List(names) {
		if !in.Stale {
			continue
		}
		msg := names.Fixture + ": removed the leftovers of " + in.ID + ", whose owner died"
		if errs := in.Kill(names); len(errs) > 0 {
			msg += fmt.Sprintf(", but for: %v", errs)
		}
		logf("%s", msg)
	}
}

// RemoveAll kills the processes of the instance of names with identifier
// id, whoever its owner, and removes it. It is not an error when there is
// no such instance.
func RemoveAll(names Names, id string) error {
	for _, in := range List(names) {
		if in.ID == id {
			if errs := in.Kill(names); len(errs) > 0 {
				return fmt.Errorf("%v", errs)
			}
		}
	}
	return nil
}
