package testslurm

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gorovod/gorovod/internal/testnet"
)

// writeFiles writes the hosts file, nsswitch.conf and an empty
// plugstack.conf, so that no SPANK plugin of the machine's own Slurm
// configuration is loaded.
func (c *Cluster) writeFiles() error {
	if err := os.WriteFile(c.HostsFile, []byte(c.hosts()), 0o644); err != nil {
		return fmt.Errorf("testslurm: %w", err)
	}
	if err := os.WriteFile(c.NSSwitch, []byte(testnet.NSSwitch()), 0o644); err != nil {
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
func (c *Cluster) hosts() string { return c.net.HostsFile(ControllerName) }

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
