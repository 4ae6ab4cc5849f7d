package runner_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/gorovod/gorovod/runner"
)

func ExampleParseHosts() {
	hosts, err := runner.ParseHosts("node1:2, node2, [fd00::7]:4")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, h := range hosts {
		fmt.Printf("%s has %d slots\n", h.Name, h.Slots)
	}
	fmt.Println(runner.FormatHosts(hosts))
	// Output:
	// node1 has 2 slots
	// node2 has 1 slots
	// fd00::7 has 4 slots
	// node1:2,node2:1,[fd00::7]:4
}

func ExampleParseHosts_error() {
	_, err := runner.ParseHosts("node1:2,node2:x")
	fmt.Println(err)
	// Output:
	// runner: bad -H host list: item 2 "node2:x": slot count "x" is not a positive integer
}

func ExampleAssign() {
	hosts, _ := runner.ParseHosts("a:2,b:2")
	slots, err := runner.Assign(hosts, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range slots {
		fmt.Printf("rank %d/%d on %s: local %d/%d, cross %d/%d\n",
			s.Rank, s.Size, s.Host, s.LocalRank, s.LocalSize, s.CrossRank, s.CrossSize)
	}
	fmt.Println("hosts used:", runner.FormatHosts(runner.UsedHosts(slots)))
	// Output:
	// rank 0/3 on a: local 0/2, cross 0/2
	// rank 1/3 on a: local 1/2, cross 0/1
	// rank 2/3 on b: local 0/1, cross 1/2
	// hosts used: a:2,b:1
}

func ExampleAssign_tooManyRanks() {
	hosts, _ := runner.ParseHosts("host1:2,host2:2")
	_, err := runner.Assign(hosts, 5)
	fmt.Println(err)
	// Output:
	// runner: not enough slots: -np 5 exceeds the 4 slots available (host1:2, host2:2)
}

func ExampleParseHostfile() {
	const hostfile = `
# two GPU boxes
gpu1 slots=4
gpu2 slots=4   # trailing comment
cpu1           # one slot
`
	hosts, err := runner.ParseHostfile(strings.NewReader(hostfile))
	fmt.Println(hosts, err)

	_, err = runner.ParseHostfile(strings.NewReader("gpu1 slots=4\ngpu2 slots=four\n"))
	fmt.Println(err)
	// Output:
	// [gpu1:4 gpu2:4 cpu1:1] <nil>
	// runner: hostfile line 2: "gpu2 slots=four": slot count "four" is not a positive integer
}

// Launch runs one process per rank and prefixes every line they print.
func ExampleLaunch() {
	cfg := runner.DefaultConfig()
	cfg.NP = 2 // on localhost: no Hosts
	cfg.Command = []string{"sh", "-c", `echo "hello from rank $GOROVOD_RANK of $GOROVOD_SIZE"`}
	if err := runner.Launch(context.Background(), cfg); err != nil {
		fmt.Println(err)
	}
	// Unordered output:
	// [0]<stdout>: hello from rank 0 of 2
	// [1]<stdout>: hello from rank 1 of 2
}

func ExampleConfig_Validate() {
	cfg := runner.DefaultConfig()
	cfg.NP = 5
	cfg.Hosts, _ = runner.ParseHosts("node1:2,node2:2")
	cfg.BindAddr = "10.0.0.1" // where node1 and node2 reach gorun
	fmt.Println(cfg.Validate())
	// Output:
	// runner: not enough slots: -np 5 exceeds the 4 slots available (node1:2, node2:2)
	// runner: bad configuration: no program to run
}
