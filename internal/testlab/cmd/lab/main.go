package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gorovod/gorovod/internal/shellquote"
	"github.com/gorovod/gorovod/internal/testlab"
	"github.com/gorovod/gorovod/internal/testnet"
)

// defaultState is the default state directory.
const defaultState = "/tmp/gorovod-lab"

// The state directory's files.
const (
	stateFile = "state.json"
	envFile   = "lab.env"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "lab:", err)
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a mistake on the command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

const usage = `usage: lab up [-hosts N] [-slots S] [-rate R] [-burst B] [-latency L] [-state DIR]
       lab down [-state DIR] [-id ID | -all]
       lab status [-state DIR]
       lab rate [-state DIR] -rate R [-burst B] [-latency L]
       lab reap [-state DIR]`

// run runs the subcommand of args, printing to out.
func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return usageError{usage}
	}
	fs := flag.NewFlagSet("lab "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	state := fs.String("state", defaultState, "directory of state.json and lab.env")
	var o testlab.Options
	var slots int
	var id string
	var all bool
	switch args[0] {
	case "up", "rate":
		if args[0] == "up" {
			fs.IntVar(&o.Hosts, "hosts", 2, "number of emulated hosts")
			fs.IntVar(&slots, "slots", 1, "slots per host in the printed -H flags")
		}
		fs.StringVar(&o.Rate, "rate", "", `tc rate per link and direction, e.g. 2gbit ("" unlimited)`)
		fs.StringVar(&o.Burst, "burst", "", "token bucket size (default 512kb)")
		fs.StringVar(&o.Latency, "latency", "", "token bucket queue bound (default 20ms)")
	case "status", "reap":
	case "down":
		fs.StringVar(&id, "id", "", "remove the lab with this identifier instead")
		fs.BoolVar(&all, "all", false, "remove every detached lab on the machine")
	default:
		return usageError{fmt.Sprintf("unknown command %q\n%s", args[0], usage)}
	}
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{err.Error() + "\n" + usage}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected arguments %q\n%s", fs.Args(), usage)}
	}
	switch args[0] {
	case "up":
		return up(*state, o, slots, out)
	case "down":
		return down(*state, id, all, out)
	case "rate":
		return setRate(*state, o, out)
	case "reap":
		return reap(*state, out)
	default:
		return status(*state, out)
	}
}

// setRate changes the rate limits of the state directory's lab and
// rewrites its state.
func setRate(state string, o testlab.Options, out io.Writer) error {
	l, slots, err := liveState(state)
	if err != nil {
		return err
	}
	if err := l.SetRate(o.Rate, o.Burst, o.Latency); err != nil {
		return err
	}
	if err := writeState(state, l, slots); err != nil {
		return err
	}
	fmt.Fprintf(out, "lab %s: rate %s\n", l.ID, rate(l))
	return nil
}

// reap kills what runs in the state directory's lab but its sshds.
func reap(state string, out io.Writer) error {
	l, _, err := liveState(state)
	if err != nil {
		return err
	}
	if left := l.Reap(); len(left) > 0 {
		return fmt.Errorf("lab %s: processes left: %v", l.ID, left)
	}
	return nil
}

// liveState returns the state directory's lab, which must be up, and the
// slots of its lab.env.
func liveState(state string) (*testlab.Lab, int, error) {
	l, err := readState(state)
	if err != nil {
		return nil, 0, err
	}
	if !alive(l) {
		return nil, 0, fmt.Errorf("lab %s of %s is gone", l.ID, state)
	}
	slots := 1
	if env, err := os.ReadFile(filepath.Join(state, envFile)); err == nil {
		for _, line := range strings.Split(string(env), "\n") {
			if v, ok := strings.CutPrefix(line, "LAB_SLOTS="); ok {
				if n, err := strconv.Atoi(strings.Trim(v, "'")); err == nil && n > 0 {
					slots = n
				}
			}
		}
	}
	return l, slots, nil
}

// up makes a detached lab and writes the state directory.
func up(state string, o testlab.Options, slots int, out io.Writer) error {
	if slots < 1 {
		return usageError{"-slots must be at least 1"}
	}
	if old, err := readState(state); err == nil && alive(old) {
		return fmt.Errorf("lab %s is up already (state in %s): lab down first, or use another -state", old.ID, state)
	}
	if err := os.MkdirAll(state, 0o755); err != nil {
		return err
	}
	o.Detached = true
	l, err := testlab.New(o)
	if err != nil {
		return err
	}
	if err := writeState(state, l, slots); err != nil {
		return errors.Join(err, l.Close())
	}
	describe(out, state, l, slots)
	return nil
}

// down removes the state directory's lab (or the one id names, or every
// detached lab) and the state files.
func down(state, id string, all bool, out io.Writer) error {
	var ids []string
	switch {
	case all:
		ids = testlab.Detached()
	case id != "":
		ids = []string{id}
	default:
		l, err := readState(state)
		if errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(out, "no lab in %s\n", state)
			return nil
		}
		if err != nil {
			return err
		}
		ids = []string{l.ID}
	}
	var errs []error
	for _, id := range ids {
		if err := testlab.Remove(id); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(out, "lab %s removed\n", id)
	}
	if l, err := readState(state); err == nil && !alive(l) {
		for _, f := range []string{stateFile, envFile} {
			if err := os.Remove(filepath.Join(state, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		_ = os.Remove(state) // when empty
	}
	return errors.Join(errs...)
}

// status prints the state directory's lab and the detached labs.
func status(state string, out io.Writer) error {
	l, err := readState(state)
	switch {
	case errors.Is(err, os.ErrNotExist):
		fmt.Fprintf(out, "no lab in %s\n", state)
	case err != nil:
		return err
	case !alive(l):
		fmt.Fprintf(out, "lab %s of %s is gone (bridge %s missing): lab down cleans up\n", l.ID, state, l.Bridge)
	default:
		fmt.Fprintf(out, "lab %s is up: %d hosts on %s, bridge address %s, rate %s\n", l.ID, len(l.Hosts), l.Subnet, l.BridgeAddr, rate(l))
	}
	fmt.Fprintf(out, "detached labs on this machine: %s\n", strings.Join(testlab.Detached(), " "))
	return nil
}

// alive reports whether l's bridge still exists.
func alive(l *testlab.Lab) bool { return l.Bridge != "" && testnet.LinkExists(l.Bridge) }

// readState reads the state directory's lab.
func readState(state string) (*testlab.Lab, error) {
	data, err := os.ReadFile(filepath.Join(state, stateFile))
	if err != nil {
		return nil, err
	}
	var l testlab.Lab
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(state, stateFile), err)
	}
	return &l, nil
}

// writeState writes state.json and lab.env.
func writeState(state string, l *testlab.Lab, slots int) error {
	data, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(state, stateFile), append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(state, envFile), []byte(envLines(l, slots)), 0o644)
}

// envLines returns lab.env: shell assignments of what scripts need.
func envLines(l *testlab.Lab, slots int) string {
	var addrs, hostNames, netns []string
	for _, h := range l.Hosts {
		addrs = append(addrs, h.Addr)
		hostNames = append(hostNames, h.Name)
		netns = append(netns, h.NetNS)
	}
	vars := [][2]string{
		{"LAB_ID", l.ID},
		{"LAB_DIR", l.Dir},
		{"LAB_SUBNET", l.Subnet},
		{"LAB_BRIDGE_ADDR", l.BridgeAddr},
		{"LAB_HOSTS", strings.Join(addrs, " ")},
		{"LAB_HOST_NAMES", strings.Join(hostNames, " ")},
		{"LAB_NETNS", strings.Join(netns, " ")},
		{"LAB_IFNAME", testnet.NodeIf},
		{"LAB_RATE", l.Rate},
		{"LAB_SLOTS", strconv.Itoa(slots)},
		{"LAB_HOSTS_FLAG", l.HostsFlag(slots)},
		{"LAB_BIN_DIR", l.BinDir},
		{"LAB_SSH", l.SSHCommand()},
		{"LAB_SSH_ARGS", strings.Join(l.SSHArgs(), " ")},
		{"LAB_SSH_KEY", l.IdentityFile},
		{"LAB_SSH_CONFIG", l.SSHConfigFile},
		{"LAB_KNOWN_HOSTS", l.KnownHosts},
		{"LAB_GORUN_ARGS", strings.Join(l.GorunArgs(), " ")},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# testlab %s, written by lab up; source it from sh or bash\n", l.ID)
	for _, v := range vars {
		fmt.Fprintf(&b, "%s=%s\n", v[0], shellquote.Quote(v[1]))
	}
	return b.String()
}

// describe prints the lab and how to reach it.
func describe(out io.Writer, state string, l *testlab.Lab, slots int) {
	fmt.Fprintf(out, "lab %s up: %d hosts on %s, rate %s\n", l.ID, len(l.Hosts), l.Subnet, rate(l))
	for _, h := range l.Hosts {
		fmt.Fprintf(out, "  %-8s %-15s netns %s (eth0)\n", h.Name, h.Addr, h.NetNS)
	}
	fmt.Fprintf(out, "  bridge   %-15s %s, in the root namespace: gorun's --bind-addr\n\n", l.BridgeAddr, l.Bridge)
	np := strconv.Itoa(slots * len(l.Hosts))
	fmt.Fprintf(out, "ssh:    ssh %s root@%s hostname\n", strings.Join(l.SSHArgs(), " "), l.Hosts[0].Addr)
	fmt.Fprintf(out, "   or:  %s root@%s hostname\n", l.SSHCommand(), l.Hosts[0].Addr)
	fmt.Fprintf(out, "gorun:  PATH=%s:$PATH bin/gorun -np %s -H %s %s PROGRAM\n", l.BinDir, np, l.HostsFlag(slots), strings.Join(l.GorunArgs(), " "))
	fmt.Fprintf(out, "        (the PATH entry makes gorun's ssh the lab's wrapper, which knows the hosts' keys)\n")
	fmt.Fprintf(out, "mpirun: mpirun --allow-run-as-root -np %s -H %s --mca plm_rsh_agent %s --mca oob_tcp_if_include %s --mca btl tcp,self --mca btl_tcp_if_include %s PROGRAM\n",
		np, l.HostsFlag(slots), l.SSHCommand(), l.Subnet, l.Subnet)
	fmt.Fprintf(out, "netns:  ip netns exec %s CMD   (network namespace only)\n\n", l.Hosts[0].NetNS)
	fmt.Fprintf(out, "state:  %s, %s (. %s)\n", filepath.Join(state, stateFile), filepath.Join(state, envFile), filepath.Join(state, envFile))
	fmt.Fprintf(out, "down:   go run ./internal/testlab/cmd/lab down%s\n", stateFlag(state))
}

// stateFlag returns " -state DIR" unless state is the default.
func stateFlag(state string) string {
	if state == defaultState {
		return ""
	}
	return " -state " + shellquote.Quote(state)
}

// rate describes l's rate limit.
func rate(l *testlab.Lab) string {
	if l.Rate == "" {
		return "unlimited"
	}
	return fmt.Sprintf("%s per link and direction (tbf burst %s latency %s)", l.Rate, l.Burst, l.Latency)
}
