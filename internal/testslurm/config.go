package testslurm

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// writeFiles writes the hosts file, nsswitch.conf and an empty
// plugstack.conf, so that no SPANK plugin of the machine's own Slurm
// configuration is loaded.
func (c *Cluster) writeFiles() error {
	if err := os.WriteFile(c.HostsFile, []byte(c.hosts()), 0o644); err != nil {
		return fmt.Errorf("testslurm: %w", err)
	}
	if err := os.WriteFile(c.NSSwitch, []byte(nsswitch()), 0o644); err != nil {
		return fmt.Errorf("testslurm: %w", err)
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "plugstack.conf"), nil, 0o644); err != nil {
		return fmt.Errorf("testslurm: %w", err)
	}
	return nil
}

// hosts returns the hosts file: the machine's localhost lines, the bridge's
// address as ControllerName and as the machine's short host name (where it
// does not clash with a node name), and every node.
func (c *Cluster) hosts() string {
	ours := map[string]bool{ControllerName: true}
	for _, n := range c.Nodes {
		ours[n.Name] = true
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
	controller := ControllerName
	if host, err := os.Hostname(); err == nil {
		host, _, _ = strings.Cut(host, ".")
		if host != "" && host != "localhost" && !ours[host] {
			controller += " " + host
		}
	}
	fmt.Fprintf(&b, "%s\t%s\n", c.BridgeAddr, controller)
	for _, n := range c.Nodes {
		fmt.Fprintf(&b, "%s\t%s\n", n.Addr, n.Name)
	}
	return b.String()
}

// nsswitch returns the machine's nsswitch.conf with its hosts line
// replaced by "hosts: files".
func nsswitch() string {
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

// slurmConf returns slurm.conf for the current ControllerPort.
func (c *Cluster) slurmConf() string {
	d := c.Dir
	lines := []string{
		"# testslurm cluster " + c.ID + ": made for one test, removed after it",
		"ClusterName=ts" + c.ID,
		fmt.Sprintf("SlurmctldHost=%s(%s)", ControllerName, c.BridgeAddr),
		fmt.Sprintf("SlurmctldPort=%d", c.ControllerPort),
		fmt.Sprintf("SlurmdPort=%d", SlurmdPort),
		// slurmctld binds the address ControllerName resolves to, the
		// bridge's, rather than every address of the machine.
		"CommunicationParameters=NoCtldInAddrAny",
		"SlurmUser=root",
		"SlurmdUser=root",
		"AuthType=auth/munge",
		"CredType=cred/munge",
		"AuthInfo=socket=" + c.MungeSocket,
		"StateSaveLocation=" + filepath.Join(d, "state"),
		"SlurmdSpoolDir=" + filepath.Join(d, "spool", "%n"),
		"SlurmctldPidFile=" + filepath.Join(d, "run", "slurmctld.pid"),
		"SlurmdPidFile=" + filepath.Join(d, "run", "slurmd-%n.pid"),
		"SlurmctldLogFile=" + filepath.Join(c.logDir, "slurmctld.log"),
		"SlurmdLogFile=" + filepath.Join(c.logDir, "slurmd-%n.log"),
		"PlugStackConfig=" + filepath.Join(d, "plugstack.conf"),
		"SlurmctldDebug=info",
		"SlurmdDebug=info",
		"MailProg=/bin/true",
		"ProctrackType=proctrack/linuxproc",
		"TaskPlugin=task/none",
		"JobContainerType=job_container/none",
		"SwitchType=switch/none",
		"MpiDefault=none",
		"ReturnToService=2",
		"SchedulerType=sched/builtin",
		"SelectType=select/cons_tres",
		"SelectTypeParameters=CR_CPU",
		"SlurmdParameters=config_overrides", // CPUs=, whatever the machine has
		"AccountingStorageType=accounting_storage/none",
		"JobAcctGatherType=jobacct_gather/none",
		"JobCompType=jobcomp/none",
		"KillWait=2",
		"MessageTimeout=10",
		"InactiveLimit=0",
		// sbatch --wait polls every 2 s, rather than after 2, 8 and 32 s,
		// when MinJobAge is at most 4 s; slurmctld forgets a finished
		// job 4 to 64 s after it ended.
		"MinJobAge=4",
		"SchedulerParameters=batch_sched_delay=0",
		"TreeWidth=65533", // slurmctld and srun reach every slurmd directly
	}
	for _, n := range c.Nodes {
		lines = append(lines, fmt.Sprintf("NodeName=%s NodeAddr=%s NodeHostname=%s CPUs=%d RealMemory=1 State=UNKNOWN",
			n.Name, n.Addr, n.Name, c.CPUsPerNode))
	}
	lines = append(lines, "PartitionName="+Partition+" Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE")
	return strings.Join(lines, "\n") + "\n"
}
