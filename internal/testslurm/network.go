package testslurm

import "github.com/gorovod/gorovod/internal/testnet"

// names are the names of what a cluster with identifier ID (6 hexadecimal
// digits) makes (see testnet): the bridge "tsbID", the host ends of the
// veth pairs "tsvIDk", the network namespaces "testslurm-ID-nodek" and the
// directory "$TMPDIR/testslurm-ID"; the bridge's interface alias,
// "gorovod-testslurm pid=P start=S", names the process that owns it.
var names = testnet.Names{
	Fixture: "testslurm",
	Bridge:  "tsb",
	Veth:    "tsv",
	NetNS:   "testslurm-",
	Dir:     "testslurm-",
	Alias:   "gorovod-testslurm ",
	Node:    "node",
}

// createBridge makes the bridge, marks it with its owner and gives it the
// first address of a /24 that no other interface on the machine uses.
func (c *Cluster) createBridge() error {
	err := c.net.CreateBridge(testnet.SelfOwner())
	c.ID, c.Bridge = c.net.ID, c.net.Bridge
	c.Subnet, c.BridgeAddr = c.net.Subnet, c.net.BridgeAddr
	return err
}

// createNodes makes each node's network namespace with its loopback up and
// one end of a veth pair, eth0, with its address and a default route
// through the bridge; the other end is a port of the bridge.
func (c *Cluster) createNodes(nodes int) error {
	err := c.net.CreateNodes(nodes)
	for _, n := range c.net.Nodes[len(c.Nodes):] {
		c.Nodes = append(c.Nodes, Node{Name: n.Name, Addr: n.Addr, NetNS: n.NetNS})
	}
	return err
}
