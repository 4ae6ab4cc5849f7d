// Package testslurm starts a real, throwaway multi-node Slurm cluster on
// the local machine for tests, and removes every trace of it when the test
// ends.
//
// Each node is a network namespace of its own with its own IPv4 address,
// joined to the other nodes and to the test's (root) namespace through veth
// pairs on a fresh Linux bridge; a slurmd runs in every node namespace,
// slurmctld listens on the bridge's address, and a private munged with a
// fresh key authenticates them all. Node names (node1, node2, ...) resolve
// through a hosts file that is bind-mounted over /etc/hosts in private mount
// namespaces: the daemons', the tasks' and those of the clients that
// Cluster.Command starts; there, an nsswitch.conf with "hosts: files"
// keeps lookups off DNS, which the nodes cannot reach. Every node also has
// its own UTS namespace, so hostname(1) on node k says nodek.
//
//	c := testslurm.Start(t, 2, 2) // 2 nodes of 2 CPUs; skips without Slurm
//	out, err := c.Command(ctx, "srun", "-N", "2", "-n", "4", "hostname").Output()
//	// ... or "sbatch --wait", "salloc -N 2 cmd", "sinfo", "scontrol" ...
//
// Start needs root (namespaces, veth links, bind mounts) and these Debian
// or Ubuntu packages:
//
//	apt-get install slurm-wlm munge iproute2 util-linux mount
//
// (slurm-wlm brings slurmctld, slurmd and the client commands; util-linux
// brings unshare and nsenter). Tested with Slurm 22.05 (Debian 12). Start
// skips the test when any of that is missing; set GOROVOD_REQUIRE_SLURM=1
// to fail it instead.
//
// Everything Start creates — namespaces, links, the bridge, the daemons and
// every process they started, the temporary directory with configuration,
// keys, spool and logs — is removed in t.Cleanup, also when the test fails;
// the daemons' logs are printed then. Should a test process die without
// running its cleanups (a test binary killed by -timeout, say), the daemons
// die with it (parent-death signals and PID namespaces), and the next Start
// on the machine removes the namespaces, links and directories it left.
//
// Several fixtures can run at once, in one test process or in several:
// each has a random identifier in its names, its own randomly chosen /24
// in 10.200.0.0–10.249.255.255 that no interface on the machine uses, and
// its own ports.
//
// The bridge forwards traffic between nodes like any Linux bridge: on a
// machine where br_netfilter is loaded and iptables' FORWARD chain drops
// packets (typical of Docker hosts), node-to-node connections fail while
// controller-to-node ones work.
package testslurm
