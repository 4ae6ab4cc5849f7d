// Command lab brings an emulated multi-host lab (internal/testlab) up and
// down by hand, for benchmarks and experiments with gorun, mpirun or
// anything else that reaches hosts over ssh. As root:
//
//	go run ./internal/testlab/cmd/lab up -hosts 2 -rate 2gbit
//	. /tmp/gorovod-lab/lab.env                # LAB_HOSTS, LAB_BRIDGE_ADDR, LAB_SSH, ...
//	PATH=$LAB_BIN_DIR:$PATH bin/gorun -np 4 -H "$LAB_HOSTS_FLAG" $LAB_GORUN_ARGS bin/allreduce_bench
//	go run ./internal/testlab/cmd/lab down
//
// up makes a detached lab (its sshds outlive the command; no stale
// collection removes it), prints its hosts, addresses, bridge address and
// the gorun, ssh and mpirun flags that reach it, and writes them to
// STATE/state.json (the testlab.Lab as JSON) and STATE/lab.env (shell
// variables); STATE is -state, /tmp/gorovod-lab by default. It refuses to
// make a second lab with the same state directory while the first is up.
//
// down removes the lab that the state directory names (or the lab -id
// names; with -all, every detached lab on the machine) and the state
// files. status prints the state directory's lab and every detached lab on
// the machine.
//
// Flags of up: -hosts N (2), -rate R (tc rate per link and direction, e.g.
// 2gbit; "" unlimited), -burst B (512kb), -latency L (20ms).
package main
