// Package testlab emulates a small cluster of hosts on the local machine
// for gorovod's multi-host tests and benchmarks: one network namespace per
// host with its own IPv4 address, joined through veth pairs on a fresh
// Linux bridge, each running its own OpenSSH sshd that lets root in with a
// key the lab makes, and optionally a rate limit on every link. gorun runs
// in the root namespace and reaches the hosts over ssh, as it would reach
// real machines; the ranks' data plane crosses the bridge.
//
//	lab := testlab.Start(t, testlab.Options{Hosts: 2, Rate: "2gbit"}) // skips without root, sshd, ip or tc
//	gorun := exec.Command("gorun", append(append([]string{"-np", "4", "-H", lab.HostsFlag(2)},
//		lab.GorunArgs()...), "./prog")...)
//	gorun.Env = append(os.Environ(), lab.GorunEnv()...)
//	out, err := lab.Command(ctx, 0, "ip", "-4", "addr").Output() // in host1's namespace
//	ssh := exec.Command("ssh", append(lab.SSHArgs(), "root@"+lab.Hosts[1].Addr, "hostname")...)
//
// Hosts. Host k (host1, host2, ...) is the network namespace
// testlab-ID-hostk, whose eth0 has the address .k+1 of the lab's /24 (a
// free one in 10.200.0.0–10.249.255.255) and a default route through the
// bridge, which has the address .1 (Lab.BridgeAddr: where gorun binds).
// Its sshd listens on port 22 of the namespace and runs, with every session
// it starts, in private mount and UTS namespaces: there, hostname(1) says
// hostk, /etc/hosts names the lab's hosts (and "launcher", the bridge's
// address), host names resolve from that file only, and /dev/shm is an
// empty tmpfs of the host's own, gone with the host. The rest of the file
// system is the machine's, so programs built here run on every host as
// they are. Lab.Command runs a program in a host's network namespace only.
//
// Links. With Options.Rate, each veth pair has a token-bucket filter
// (tc-tbf(8): rate, burst 512kb, latency 20ms unless set) on both of its
// ends, so that what a host sends and what it receives are each limited to
// the rate; the kernel's netem is not needed.
//
// ssh. Lab.SSHArgs are the ssh client options that reach every host as
// root: the lab's key, its known_hosts file (strict host key checking) and
// no user configuration. gorun has flags for the key (--ssh-identity-file)
// and the port, not for the known_hosts file, so Lab.BinDir holds an "ssh"
// that runs the system's client with the lab's ssh_config (SSHConfigFile):
// put it first in gorun's PATH (Lab.GorunEnv). mpirun takes
// `--mca plm_rsh_agent "$(lab.SSHCommand())"`.
//
// Teardown. Start registers Close with t.Cleanup: it kills every process in
// the hosts' namespaces (sshd, sessions, ranks), then removes the veth
// pairs, the namespaces, the lab's directory (keys, configurations, logs)
// and the bridge. A test process killed without its cleanups takes its
// sshds with it (parent-death signals); the next Start or New on the
// machine removes what else it left, as internal/testnet describes. A lab
// made with Options.Detached (by the lab command, cmd/lab) is never removed
// that way: it outlives its maker until Close or Remove.
//
// Start needs root and Debian's openssh-server, openssh-client, iproute2
// and util-linux; it skips the test without them, or fails it where the CI
// switch testenv.RequireCluster (GOROVOD_REQUIRE_CLUSTER=1) is on. Several
// labs can run at once, in one process or in several.
package testlab
