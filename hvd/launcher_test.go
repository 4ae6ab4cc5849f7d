package hvd_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/kernels"
)

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// torchrunEnv returns the getenv of rank r of n in a torchrun-style job
// whose rank 0 serves on 127.0.0.1:port, plus extra "NAME=value" entries.
func torchrunEnv(r, n, port int, extra ...string) func(string) string {
	m := map[string]string{"RANK": strconv.Itoa(r), "WORLD_SIZE": strconv.Itoa(n),
		"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": strconv.Itoa(port)}
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

// joinDetected starts one runtime per getenv, concurrently, as processes
// started by another launcher would, and returns them with their errors.
func joinDetected(t *testing.T, envs []func(string) string, timeout time.Duration) ([]*hvd.Runtime, []error) {
	t.Helper()
	rts := make([]*hvd.Runtime, len(envs))
	errs := make([]error, len(envs))
	var wg sync.WaitGroup
	for r, getenv := range envs {
		cfg, err := hvd.ConfigFromEnv(getenv)
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		cfg.StartTimeout = timeout
		wg.Go(func() { rts[r], errs[r] = hvd.NewRuntime(context.Background(), cfg) })
	}
	wg.Wait()
	return rts, errs
}

// TestLauncherJobWithoutGorun: three ranks with only torchrun-style
// variables find each other through rank 0's rendezvous, derive their
// local and cross ranks, and all-reduce.
func TestLauncherJobWithoutGorun(t *testing.T) {
	const n = 3
	port := freePort(t)
	envs := make([]func(string) string, n)
	for r := range n {
		envs[r] = torchrunEnv(r, n, port)
	}
	rts, errs := joinDetected(t, envs, 20*time.Second)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		defer rts[r].Shutdown()
	}
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		if rt.Launcher() != jobenv.LauncherTorchrun {
			return fmt.Errorf("launcher %q", rt.Launcher())
		}
		if rt.LocalRank() != r || rt.LocalSize() != n || rt.CrossRank() != 0 || rt.CrossSize() != 1 {
			return fmt.Errorf("local %d/%d cross %d/%d, want %d/%d 0/1", rt.LocalRank(), rt.LocalSize(),
				rt.CrossRank(), rt.CrossSize(), r, n)
		}
		return sumRanks(rt, r, 6)
	})
	// Rank 0 stopped serving once the mesh formed: the port is free again.
	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("the rendezvous port is still held after the job formed: %v", err)
	}
	ln.Close()
}

// TestLauncherJobTFConfig: a chief and two workers started with nothing but
// TF_CONFIG, as Kubeflow's TFJob sets it in each pod, form one job: the
// chief is rank 0 and serves the rendezvous on its own address, worker i is
// rank i+1, and they all-reduce.
func TestLauncherJobTFConfig(t *testing.T) {
	port := freePort(t)
	cluster := fmt.Sprintf(`{"chief":["127.0.0.1:%d"],"worker":["127.0.0.1:1","127.0.0.1:2"]}`, port)
	tasks := []string{`{"type":"chief","index":0}`, `{"type":"worker","index":0}`, `{"type":"worker","index":1}`}
	envs := make([]func(string) string, len(tasks))
	for i, task := range tasks {
		tf := `{"cluster":` + cluster + `,"task":` + task + `}`
		envs[i] = func(k string) string {
			if k == "TF_CONFIG" {
				return tf
			}
			return ""
		}
	}
	rts, errs := joinDetected(t, envs, 20*time.Second)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("task %s: %v", tasks[i], err)
		}
		defer rts[i].Shutdown()
	}
	for i, rt := range rts {
		if rt.Rank() != i || rt.Size() != 3 {
			t.Errorf("task %s: rank %d of %d, want %d of 3", tasks[i], rt.Rank(), rt.Size(), i)
		}
	}
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		if rt.Launcher() != jobenv.LauncherTFConfig {
			return fmt.Errorf("launcher %q", rt.Launcher())
		}
		if rt.LocalRank() != r || rt.LocalSize() != 3 {
			return fmt.Errorf("local %d/%d, want %d/3", rt.LocalRank(), rt.LocalSize(), r)
		}
		return sumRanks(rt, r, 6)
	})
}

// TestLauncherJobNamesMissingRank: a rank that never starts is named by
// every other rank after the start timeout.
func TestLauncherJobNamesMissingRank(t *testing.T) {
	port := freePort(t)
	envs := []func(string) string{torchrunEnv(0, 3, port), torchrunEnv(1, 3, port)} // rank 2 never comes
	rts, errs := joinDetected(t, envs, 2*time.Second)
	for r, err := range errs {
		if err == nil {
			rts[r].Shutdown()
			t.Fatalf("rank %d joined a job whose rank 2 never came", r)
		}
		if !strings.Contains(err.Error(), "rank 2") || !strings.Contains(err.Error(), "torchrun") {
			t.Errorf("rank %d: %v; want it to name rank 2 and the launcher", r, err)
		}
		t.Logf("rank %d: %v", r, err)
	}
}

// TestLauncherJobPortTaken: rank 0 says which port it could not serve on
// and which variable picks another; the other rank gives up after the
// start timeout instead of joining something else.
func TestLauncherJobPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	go func() { // an unrelated server that talks garbage
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.0 200 OK\r\n\r\nhello"))
			c.Close()
		}
	}()
	envs := []func(string) string{torchrunEnv(0, 2, port), torchrunEnv(1, 2, port)}
	rts, errs := joinDetected(t, envs, 2*time.Second)
	for r, err := range errs {
		if err == nil {
			rts[r].Shutdown()
			t.Fatalf("rank %d joined", r)
		}
	}
	if !strings.Contains(errs[0].Error(), ":"+strconv.Itoa(port)) || !strings.Contains(errs[0].Error(), jobenv.EnvRendezvousPort) {
		t.Errorf("rank 0: %v; want the port and %s", errs[0], jobenv.EnvRendezvousPort)
	}
	t.Logf("rank 0: %v\nrank 1: %v", errs[0], errs[1])
}

// TestLauncherJobsStayApart: two jobs on one host with different secrets
// but the same rendezvous port cannot join each other's ranks.
func TestLauncherJobsStayApart(t *testing.T) {
	port := freePort(t)
	a := "GOROVOD_SECRET=" + strings.Repeat("aa", 32)
	b := "GOROVOD_SECRET=" + strings.Repeat("bb", 32)
	envs := []func(string) string{torchrunEnv(0, 2, port, a), torchrunEnv(1, 2, port, b)}
	rts, errs := joinDetected(t, envs, 2*time.Second)
	for r, err := range errs {
		if err == nil {
			rts[r].Shutdown()
			t.Fatalf("rank %d joined a job with another secret", r)
		}
	}
	if !strings.Contains(errs[1].Error(), "secret") {
		t.Errorf("rank 1: %v; want it to suspect the secret", errs[1])
	}
}

// TestLauncherJobTLS: ranks of a torchrun-style job with GOROVOD_TLS=1
// join rank 0's rendezvous and form their mesh inside TLS and all-reduce;
// a rank without it fails, naming the mismatch.
func TestLauncherJobTLS(t *testing.T) {
	port := freePort(t)
	rts, errs := joinDetected(t, []func(string) string{
		torchrunEnv(0, 2, port, jobenv.EnvTLS+"=1"), torchrunEnv(1, 2, port, jobenv.EnvTLS+"=1"),
	}, 20*time.Second)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		defer rts[r].Shutdown()
	}
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		return sumRanks(rt, r, 3)
	})

	port = freePort(t)
	rts, errs = joinDetected(t, []func(string) string{
		torchrunEnv(0, 2, port, jobenv.EnvTLS+"=1"), torchrunEnv(1, 2, port),
	}, 5*time.Second)
	for r, rt := range rts {
		if rt != nil {
			rt.Shutdown()
			t.Errorf("rank %d joined a job whose ranks disagree about TLS", r)
		}
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "started without it") {
		t.Errorf("rank 1 without TLS: %v, want an error naming the mismatch", errs[1])
	}
}

// sumRanks all-reduces r+1 over the job on rank r and checks the sum.
func sumRanks(rt *hvd.Runtime, r int, want float32) error {
	x := hvd.NewTensor("x", []float32{float32(r + 1)})
	if err := rt.Allreduce(context.Background(), x, kernels.Sum, hvd.ReduceOptions{}); err != nil {
		return err
	}
	if v := hvd.Values[float32](x)[0]; v != want {
		return fmt.Errorf("sum %v, want %v", v, want)
	}
	return nil
}
