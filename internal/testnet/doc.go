// Package testnet builds the network under gorovod's emulated multi-host
// test fixtures (internal/testslurm, internal/testlab) and removes every
// trace of it: a fresh Linux bridge in the root network namespace with the
// first address of a free /24, and one network namespace per emulated host,
// joined to the bridge by a veth pair whose namespace end is eth0, with its
// own address on that /24, a default route through the bridge and,
// optionally, a token-bucket rate limit (tc tbf) on both ends.
//
//	n := testnet.New(names)                 // names: a fixture's prefixes
//	err := n.CreateBridge(testnet.SelfOwner()) // marks the bridge with its owner
//	err = n.CreateNodes(2)                 // node1 10.x.y.2, node2 10.x.y.3, ...
//	err = n.Limit(testnet.TBF{Rate: "2gbit"})
//	// ... processes in the namespaces: nsenter --net=/run/netns/NAME ...
//	testnet.KillIn(n.NS)                   // whatever still runs there
//	errs := n.Remove(dir)                  // links, namespaces, dir, bridge
//
// Every fixture kind has its own name prefixes (Names) and every instance
// a random identifier (6 hexadecimal digits) in its names, so that several
// run at once, in one process or in several, and the /24 is chosen at
// random in 10.200.0.0–10.249.255.255 among those no interface or route of
// the machine uses.
//
// Ownership. The bridge is made first and removed last; its interface
// alias names its owner: a process ("pid=P start=S", from SelfOwner), or
// any other word, such as "manual", for an instance that outlives the
// process that made it. CollectStale, called by a fixture before it builds
// a new instance, removes what instances of dead owners left behind when
// their process was killed without its cleanups: their processes, links,
// namespaces and directories. An owner that is not a process is never
// dead: only an explicit removal (RemoveAll) ends such an instance.
//
// Everything here needs root and the ip(8) command of iproute2; Limit needs
// tc(8) and the kernel's tbf queueing discipline.
package testnet
