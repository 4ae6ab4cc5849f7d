package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport"
)

// The benchmark can start its own ranks: the parent re-executes itself once
// per rank with these variables set. Each child listens on a loopback port
// and prints it; the parent collects the ports and writes the address table
// to every child's standard input; the children then form the TCP mesh.
const (
	envRank   = "ALLREDUCE_BENCH_RANK"
	envSize   = "ALLREDUCE_BENCH_SIZE"
	envSecret = "ALLREDUCE_BENCH_SECRET"
)

type child struct {
	rank, size int
	secret     []byte
}

func childEnv() (child, bool) {
	r, ok := os.LookupEnv(envRank)
	if !ok {
		return child{}, false
	}
	rank, _ := strconv.Atoi(r)
	size, _ := strconv.Atoi(os.Getenv(envSize))
	secret, _ := hex.DecodeString(os.Getenv(envSecret))
	return child{rank: rank, size: size, secret: secret}, true
}

func (ch child) connect(ctx context.Context) (collective.Transport, error) {
	ln, err := tcptransport.Listen("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	fmt.Printf("ADDR %s\n", ln.Addr())
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("reading the address table: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return tcptransport.Connect(ctx, ln, tcptransport.Config{
		Rank: ch.rank, Size: ch.size, Addrs: strings.Split(strings.TrimSpace(line), ","), Secret: ch.secret,
	})
}

// launch starts np copies of this program as ranks and waits for them. The
// first rank to fail stops the others.
func launch(np int, argv []string) error {
	secret := make([]byte, 32)
	rand.Read(secret) // crypto/rand.Read never fails on Linux
	self, err := os.Executable()
	if err != nil {
		return err
	}
	procs := make([]*exec.Cmd, np)
	outs := make([]*bufio.Reader, np)
	ins := make([]io.WriteCloser, np)
	for r := range np {
		cmd := exec.Command(self, argv[1:]...)
		cmd.Env = append(os.Environ(), envRank+"="+strconv.Itoa(r), envSize+"="+strconv.Itoa(np), envSecret+"="+hex.EncodeToString(secret))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if ins[r], err = cmd.StdinPipe(); err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			killAll(procs)
			return fmt.Errorf("starting rank %d: %w", r, err)
		}
		procs[r], outs[r] = cmd, bufio.NewReader(out)
	}
	addrs := make([]string, np)
	for r := range np {
		line, err := outs[r].ReadString('\n')
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ADDR ")
		if err != nil || !ok {
			killAll(procs)
			return fmt.Errorf("rank %d did not report its address (%q, %v)", r, line, err)
		}
		addrs[r] = addr
	}
	table := strings.Join(addrs, ",") + "\n"
	for r := range np {
		io.WriteString(ins[r], table)
		ins[r].Close()
	}
	return wait(procs, outs)
}

// wait forwards every rank's output and returns the first failure, after
// stopping the other ranks.
func wait(procs []*exec.Cmd, outs []*bufio.Reader) error {
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(procs))
	for r, p := range procs {
		wg.Go(func() {
			io.Copy(lockedStdout{&mu}, outs[r])
			if err := p.Wait(); err != nil {
				errs <- fmt.Errorf("rank %d: %w", r, err)
				killAll(procs)
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

type lockedStdout struct{ mu *sync.Mutex }

func (l lockedStdout) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return os.Stdout.Write(p)
}

func killAll(procs []*exec.Cmd) {
	for _, p := range procs {
		if p != nil && p.Process != nil {
			p.Process.Kill()
		}
	}
}
