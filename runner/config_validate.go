package runner

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/gorovod/gorovod/settings"
)

// Validate checks c and returns one error per broken invariant (joined with
// errors.Join), nil if c can be launched. Errors wrap ErrConfig, or the
// sentinel of the host or knob at fault (ErrNumProc, ErrSlots, ErrHosts,
// jobenv.ErrEnv).
func (c Config) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...))
		}
	}
	errs = append(errs, c.checkHostList())
	check(len(c.Command) > 0, "no program to run")
	check(len(c.Command) == 0 || c.Command[0] != "", "the program name is empty")
	check(c.GracePeriod >= 0, "grace period %v is negative", c.GracePeriod)
	check(c.SSHPort >= 0 && c.SSHPort < 1<<16, "ssh port %d is not in 0..65535", c.SSHPort)
	check(c.SSHConnectTimeout >= 0, "ssh connect timeout %v is negative", c.SSHConnectTimeout)
	errs = append(errs, c.checkLauncher())
	check(c.BindTo == "" || c.BindTo == BindNone || c.BindTo == BindCore, "--bind-to %q: want core or none", c.BindTo)
	for _, kv := range c.ForwardEnv {
		errs = append(errs, checkForward(kv))
	}
	errs = append(errs, c.checkAddrs())
	errs = append(errs, c.jobEnv().Validate())
	check(c.MinNP >= 0 && c.MinNP <= max(c.NP, 1), "--min-np %d is not in 0..%d (-np)", c.MinNP, c.NP)
	check(c.MaxNP == 0 || c.MaxNP >= c.NP, "--max-np %d is below -np %d", c.MaxNP, c.NP)
	check(c.ResetLimit >= 0, "--reset-limit %d is negative", c.ResetLimit)
	check(c.ResetLimit == 0 || c.Elastic(), "--reset-limit needs an elastic job (--min-np, --max-np or --host-discovery-script)")
	check(!c.Elastic() || c.Launcher != SpawnSrun, "an elastic job cannot run its ranks as srun steps")
	check(c.DiscoveryScript == "" || len(c.Hosts) == 0, "give -H (or -hostfile) or --host-discovery-script, not both")
	check(c.SlotsPerHost >= 0, "--slots-per-host %d is negative", c.SlotsPerHost)
	check(c.SlotsPerHost == 0 || c.DiscoveryScript != "", "--slots-per-host needs --host-discovery-script")
	check(c.ElasticTimeout >= 0, "--elastic-timeout %v is negative", c.ElasticTimeout)
	check(c.DashboardLinger >= 0, "--dashboard-linger %v is negative", c.DashboardLinger)
	check(c.DashboardLinger == 0 || c.Dashboard != "", "--dashboard-linger needs --dashboard")
	for _, r := range c.OutputRanks {
		if c.PS > 0 {
			check(r >= 0 && r < c.size(), "--output-ranks %d is not a rank of the %d of a chief, -np %d workers and --ps %d servers", r, c.size(), c.NP, c.PS)
			continue
		}
		check(r >= 0 && (r < c.NP || c.Elastic()), "--output-ranks %d is not a rank of -np %d", r, c.NP)
	}
	errs = append(errs, c.checkElasticSets())
	check(c.PS >= 0, "--ps %d is negative", c.PS)
	check(c.PS == 0 || !c.Elastic(), "--ps cannot make an elastic job (--min-np, --max-np or --host-discovery-script): a parameter-server job's workers may fail and come back without it")
	check(c.PS == 0 || c.Launcher != SpawnSrun, "--ps cannot run its ranks as srun steps; in a Slurm allocation start the job with srun -n $((1+M+N)) --export=ALL,GOROVOD_PS_SERVERS=N (see examples/slurm)")
	check(!c.Evaluator || c.PS > 0, "--evaluator needs a parameter-server job (--ps N)")
	check(c.EvaluatorTimeout >= 0, "--evaluator-timeout %v is negative", c.EvaluatorTimeout)
	check(c.EvaluatorTimeout == 0 || c.Evaluator, "--evaluator-timeout needs --evaluator")
	return errors.Join(errs...)
}

// checkHostList checks the hosts against NP (see Assign), that an NP
// without hosts fits on this one host, and that no two hosts name this
// machine.
func (c Config) checkHostList() error {
	if len(c.Hosts) == 0 && c.NP+max(c.PS, 0) > MaxSlotsPerHost {
		if c.PS > 0 {
			return fmt.Errorf("%w: -np %d workers and --ps %d servers exceed the %d ranks one host can run (no -H or -hostfile was given, so all would run on localhost)",
				ErrSlots, c.NP, c.PS, MaxSlotsPerHost)
		}
		return fmt.Errorf("%w: -np %d exceeds the %d ranks one host can run (no -H or -hostfile was given, so all would run on localhost)",
			ErrSlots, c.NP, MaxSlotsPerHost)
	}
	if c.PS > 0 {
		if err := checkAssignPSArgs(c.hosts(), c.NP, c.PS); err != nil {
			return err
		}
	} else if err := checkAssignArgs(c.hosts(), c.NP); err != nil {
		return err
	}
	return checkLocalAliases(c.Hosts)
}

// checkLauncher checks Launcher, and that SpawnLocal names no remote host.
func (c Config) checkLauncher() error {
	switch c.Launcher {
	case SpawnAuto, SpawnSSH, SpawnSrun:
	case SpawnLocal:
		for _, h := range c.hosts() {
			if !IsLocalHost(h.Name) {
				return fmt.Errorf("%w: launcher local cannot start ranks on host %s", ErrConfig, h.Name)
			}
		}
	default:
		return fmt.Errorf("%w: launcher %q: want local, ssh or srun", ErrConfig, clip(c.Launcher, maxQuoted))
	}
	return nil
}

// checkForward checks one -x entry: "NAME" or "NAME=value", NAME not a
// GOROVOD_* variable.
func checkForward(kv string) error {
	name, _, _ := strings.Cut(kv, "=")
	switch {
	case name == "" || strings.ContainsAny(name, " \t\n\x00"):
		return fmt.Errorf("%w: -x %q: want NAME or NAME=value", ErrConfig, clip(kv, maxQuoted))
	case strings.HasPrefix(name, "GOROVOD_"):
		return fmt.Errorf("%w: -x %s: gorun sets the GOROVOD_ variables itself", ErrConfig, name)
	}
	return nil
}

// checkAddrs checks the form of BindAddr. Whether it is an address of this
// machine, whether NetworkInterface exists, and (with neither) which
// address remote hosts reach are found out when Launch listens.
func (c Config) checkAddrs() error {
	if c.BindAddr == "" {
		return nil
	}
	host, _, err := splitBindAddr(c.BindAddr)
	if err != nil {
		return err
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		return fmt.Errorf("%w: --bind-addr %s: ranks cannot dial an unspecified address; give an address of this machine", ErrConfig, c.BindAddr)
	}
	return nil
}

// splitBindAddr splits BindAddr into host and port ("0" when absent).
func splitBindAddr(addr string) (host, port string, err error) {
	host, port, err = net.SplitHostPort(addr)
	if err != nil { // no port: a bare host or IPv6 address
		host, port = strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]"), "0"
	}
	if n, perr := strconv.Atoi(port); perr != nil || n < 0 || n >= 1<<16 || host == "" {
		return "", "", fmt.Errorf("%w: --bind-addr %q: want host or host:port", ErrConfig, clip(addr, maxQuoted))
	}
	return host, port, nil
}

// checkElasticSets refuses --process-sets that an elastic job could
// outgrow: each formation adds the sets again, and one that names a rank
// the job may lose (one at or above --min-np, or -np where that is not
// given) would fail the formation that lacks it.
func (c Config) checkElasticSets() error {
	if !c.Elastic() || c.ProcessSets == "" {
		return nil
	}
	sets, err := settings.ParseProcessSets(c.ProcessSets)
	if err != nil {
		return nil // the knobs' own check reports it
	}
	least := c.MinNP
	if least == 0 {
		least = c.NP
	}
	for _, set := range sets {
		if top := slices.Max(set); top >= least {
			return fmt.Errorf("%w: --process-sets: the set %v names rank %d, but this elastic job may shrink to %d ranks (--min-np), and each formation adds its sets again; keep the sets to ranks below %d, or add them with AddProcessSet in the training function", ErrConfig, set, top, least, least)
		}
	}
	return nil
}
