package ps_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/gorovod/gorovod/ps"
)

// Two parameter servers, a chief that creates a variable split across
// them, and a worker that attaches, pushes a gradient and pulls.
func ExampleDialServers() {
	secret := make([]byte, 32) // the job secret; a job gets it from its Job
	if _, err := rand.Read(secret); err != nil {
		panic(err)
	}
	var addrs []string
	for i := range 2 {
		s, err := ps.NewServer(ps.ServerConfig{Addr: "127.0.0.1:0", Secret: secret, Index: i})
		if err != nil {
			panic(err)
		}
		if err := s.Start(); err != nil {
			panic(err)
		}
		defer s.Stop()
		addrs = append(addrs, s.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	chief, err := ps.DialServers(ctx, addrs, ps.ClientConfig{Secret: secret, WorkerID: -1})
	if err != nil {
		panic(err)
	}
	defer chief.Close()
	p, _ := ps.FixedShardsPartitioner(2)
	w := ps.Variable{Name: "w", Shape: []int{4}, Value: []float64{1, 2, 3, 4}}
	if err := chief.Create(ctx, []ps.Variable{w}, p, ps.Optimizer{Kind: ps.OptimizerSGD, LR: 0.5}); err != nil {
		panic(err)
	}

	worker, err := ps.DialServers(ctx, addrs, ps.ClientConfig{Secret: secret, WorkerID: 0})
	if err != nil {
		panic(err)
	}
	defer worker.Close()
	if err := worker.Attach(ctx); err != nil {
		panic(err)
	}
	for _, v := range worker.Variables() {
		for _, sh := range v.Shards {
			fmt.Printf("%s rows %d-%d on server %d\n", v.Name, sh.Rows.Start, sh.Rows.End, sh.Server)
		}
	}
	if err := worker.Push(ctx, map[string][]float64{"w": {2, 2, 2, 2}}); err != nil {
		panic(err)
	}
	vals := map[string][]float64{}
	step, err := worker.Pull(ctx, vals)
	if err != nil {
		panic(err)
	}
	fmt.Println("step", step, "w", vals["w"])
	// Output:
	// w rows 0-2 on server 0
	// w rows 2-4 on server 1
	// step 1 w [0 1 2 3]
}
