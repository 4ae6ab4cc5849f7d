// Command psjoin is the task program of the launcher's tests of a
// parameter-server job's start: every task joins with ps.Join and prints
// its place ("role=ps index=1 rank=4 host=node2 workers=2 servers=2
// chief=ADDR ps=ADDR,ADDR"); then the workers and the servers dial the chief, and the
// workers and the chief dial every server, each saying who it is, and the
// chief and the servers exit once every task that should have dialed them
// has. So the job ends only if every task reached every address it was
// given, and nobody leaves before the others have read the peer table.
// The evaluator (GOROVOD_ROLE=evaluator) says so and waits for SIGTERM,
// then exits 0, as evaluator.Run does.
package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/ps"
)

// wait bounds every wait for the other tasks.
const wait = time.Minute

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "psjoin:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if task, ok, err := jobenv.DetectTask(os.Getenv); err == nil && ok && task.Role == jobenv.RoleEvaluator {
		return evaluate(ctx, task)
	}
	j, err := ps.Join(ctx, os.Getenv)
	if err != nil {
		return err
	}
	defer j.Close()
	fmt.Printf("role=%s index=%d rank=%d host=%s workers=%d servers=%d chief=%s ps=%s\n",
		j.Role, j.Index, j.Rank, j.Hostname, j.Workers, j.Servers, j.ChiefAddr, strings.Join(j.ServerAddrs, ","))
	me := fmt.Sprintf("%s %d", j.Role, j.Index)
	var targets []string
	if j.Role != jobenv.RoleChief {
		targets = append(targets, j.ChiefAddr)
	}
	if j.Role != jobenv.RolePS {
		targets = append(targets, j.ServerAddrs...)
	}
	for _, addr := range targets {
		if err := hello(addr, me); err != nil {
			return err
		}
	}
	callers := 0
	switch j.Role {
	case jobenv.RoleChief:
		callers = j.Workers + j.Servers
	case jobenv.RolePS:
		callers = j.Workers + 1
	}
	return accept(j.Listener, callers)
}

// hello dials addr (retrying: the task there may still be starting to
// accept) and says who this task is.
func hello(addr, me string) error {
	deadline := time.Now().Add(wait)
	for {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err == nil {
			defer c.Close()
			_, err = fmt.Fprintln(c, me)
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dialing %s: %w", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// accept takes n connections on ln and reads who each is.
func accept(ln net.Listener, n int) error {
	if n == 0 {
		return nil
	}
	if tl, ok := ln.(*net.TCPListener); ok {
		tl.SetDeadline(time.Now().Add(wait))
	}
	for range n {
		c, err := ln.Accept()
		if err != nil {
			return fmt.Errorf("waiting for %d tasks to dial %s: %w", n, ln.Addr(), err)
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil {
			return err
		}
		fmt.Printf("heard from %s\n", strings.TrimSpace(line))
	}
	return nil
}

// evaluate stands in for evaluator.Run: it waits for SIGTERM and returns nil.
func evaluate(ctx context.Context, task jobenv.Task) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
	defer stop()
	fmt.Printf("role=evaluator host=%s secret=%d bytes\n", task.Env.Hostname, len(task.Env.Secret))
	<-ctx.Done()
	if ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("no SIGTERM within %v", wait)
	}
	fmt.Println("evaluator stopped by SIGTERM")
	return nil
}
