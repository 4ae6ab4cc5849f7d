package ps

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/rendezvous"
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

// getenvOf is a getenv over "NAME=value" entries.
func getenvOf(kv ...string) func(string) string {
	m := map[string]string{}
	for _, e := range kv {
		k, v, _ := strings.Cut(e, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

// torchrunTask is rank r of n on this host in a torchrun-style job whose
// rank 0 serves the rendezvous on port, with servers parameter servers.
func torchrunTask(r, n, port, servers int, timeout string) func(string) string {
	return getenvOf("RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n), "LOCAL_RANK="+strconv.Itoa(r),
		"LOCAL_WORLD_SIZE="+strconv.Itoa(n), "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port),
		jobenv.EnvPSServers+"="+strconv.Itoa(servers), jobenv.EnvStartTimeout+"="+timeout)
}

// joinAll runs Join for every getenv at once and returns the jobs and errors.
func joinAll(envs []func(string) string) ([]*Job, []error) {
	jobs := make([]*Job, len(envs))
	errs := make([]error, len(envs))
	var wg sync.WaitGroup
	for i, getenv := range envs {
		wg.Go(func() { jobs[i], errs[i] = Join(context.Background(), getenv) })
	}
	wg.Wait()
	return jobs, errs
}

// checkAgree checks that every job found the same addresses, that the
// chief and the servers listen where they are published (a dial gets
// through), and the roles in rank order.
func checkAgree(t *testing.T, jobs []*Job, workers, servers int) {
	t.Helper()
	chief := jobs[0]
	if chief.Role != jobenv.RoleChief || chief.Listener == nil || chief.ChiefAddr != chief.Listener.Addr().String() {
		t.Fatalf("chief: role %q, listener %v, published %q", chief.Role, chief.Listener, chief.ChiefAddr)
	}
	for r, j := range jobs {
		if j.ChiefAddr != chief.ChiefAddr || !slices.Equal(j.ServerAddrs, chief.ServerAddrs) {
			t.Errorf("rank %d: chief %q servers %q; the chief's: %q %q", r, j.ChiefAddr, j.ServerAddrs, chief.ChiefAddr, chief.ServerAddrs)
		}
		if j.Workers != workers || j.Servers != servers || j.Rank != r || len(j.Secret) != 32 {
			t.Errorf("rank %d: workers %d servers %d rank %d secret %d bytes", r, j.Workers, j.Servers, j.Rank, len(j.Secret))
		}
		switch {
		case r >= 1 && r <= workers:
			if j.Role != jobenv.RoleWorker || j.Index != r-1 || j.Listener != nil {
				t.Errorf("rank %d: role %q index %d listener %v, want worker %d listening nowhere", r, j.Role, j.Index, j.Listener, r-1)
			}
		case r > workers:
			i := r - 1 - workers
			if j.Role != jobenv.RolePS || j.Index != i || j.Listener == nil || j.Listener.Addr().String() != chief.ServerAddrs[i] {
				t.Errorf("rank %d: role %q index %d listener %v, want server %d at %s", r, j.Role, j.Index, j.Listener, i, chief.ServerAddrs[i])
			}
		}
	}
	for _, addr := range append([]string{chief.ChiefAddr}, chief.ServerAddrs...) {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Errorf("dialing %s: %v", addr, err)
			continue
		}
		c.Close()
	}
}

// closeAll closes every job that joined.
func closeAll(t *testing.T, jobs []*Job) {
	for r, j := range jobs {
		if j == nil {
			continue
		}
		if err := j.Close(); err != nil {
			t.Errorf("rank %d: Close: %v", r, err)
		}
		if err := j.Close(); err != nil {
			t.Errorf("rank %d: second Close: %v", r, err)
		}
	}
}

// TestJoinChiefServesRendezvous: a chief, a worker and a server started
// by a launcher other than gorun meet through the rendezvous the chief
// serves and agree on the chief's and the server's addresses.
func TestJoinChiefServesRendezvous(t *testing.T) {
	port := freePort(t)
	envs := make([]func(string) string, 3)
	for r := range envs {
		envs[r] = torchrunTask(r, 3, port, 1, "30s")
	}
	jobs, errs := joinAll(envs)
	defer closeAll(t, jobs)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	checkAgree(t, jobs, 1, 1)
	if jobs[0].srv == nil || jobs[1].rdv != nil {
		t.Error("the chief serves no rendezvous, or a worker keeps a client of it")
	}
}

// TestJoinGorun: under gorun's contract (a rendezvous the launcher
// serves), a chief, two workers and two servers agree on the addresses,
// and every task keeps its client of gorun's rendezvous until Close.
func TestJoinGorun(t *testing.T) {
	secret := make([]byte, 32)
	for i := range secret {
		secret[i] = byte(i)
	}
	const size = 5
	srv, err := rendezvous.NewServer(rendezvous.ServerConfig{Addr: "127.0.0.1:0", Secret: secret, Size: size})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	base := jobenv.DefaultEnv()
	base.RendezvousAddr, base.Secret, base.StartTimeout = srv.Addr(), secret, 30*time.Second
	envs := make([]func(string) string, size)
	for r := range envs {
		e := base.ForSlot(jobenv.Slot{Host: "localhost", Rank: r, Size: size, LocalRank: r, LocalSize: size, CrossSize: 1})
		envs[r] = getenvOf(append(e.Environ(), jobenv.EnvPSServers+"=2")...)
	}
	jobs, errs := joinAll(envs)
	defer closeAll(t, jobs)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	checkAgree(t, jobs, 2, 2)
	for r, j := range jobs {
		if j.rdv == nil || j.srv != nil || j.Hostname != "localhost" {
			t.Errorf("rank %d: keeps a client %v, serves %v, host %q", r, j.rdv != nil, j.srv != nil, j.Hostname)
		}
	}
}

// TestJoinTFConfig: under TF_CONFIG the addresses are the spec's, the
// chief and the server listen on their listed ports, and nobody waits.
func TestJoinTFConfig(t *testing.T) {
	chiefPort, psPort := freePort(t), freePort(t)
	chief := "127.0.0.1:" + strconv.Itoa(chiefPort)
	server := "127.0.0.1:" + strconv.Itoa(psPort)
	spec := `{"cluster":{"chief":["` + chief + `"],"worker":["127.0.0.1:1"],"ps":["` + server + `"]},"task":`
	var jobs []*Job
	defer func() { closeAll(t, jobs) }()
	for _, task := range []string{`{"type":"chief","index":0}`, `{"type":"worker","index":0}`, `{"type":"ps","index":0}`} {
		j, err := Join(context.Background(), getenvOf("TF_CONFIG="+spec+task+"}"))
		if err != nil {
			t.Fatalf("%s: %v", task, err)
		}
		jobs = append(jobs, j)
	}
	for r, j := range jobs {
		if j.ChiefAddr != chief || !slices.Equal(j.ServerAddrs, []string{server}) {
			t.Errorf("task %d: chief %q servers %q", r, j.ChiefAddr, j.ServerAddrs)
		}
	}
	for r, port := range map[int]int{0: chiefPort, 2: psPort} {
		if got := jobs[r].Listener.Addr().(*net.TCPAddr).Port; got != port {
			t.Errorf("task %d listens on port %d, want %d", r, got, port)
		}
	}
	if jobs[1].Listener != nil || jobs[1].Role != jobenv.RoleWorker || jobs[2].Role != jobenv.RolePS {
		t.Errorf("worker listener %v, roles %q %q", jobs[1].Listener, jobs[1].Role, jobs[2].Role)
	}
	for _, addr := range []string{chief, server} {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("dialing %s: %v", addr, err)
		}
		c.Close()
	}
}

// TestJoinStartTimeout: a task that never comes makes Join fail on the
// others within the start timeout, naming the missing rank.
func TestJoinStartTimeout(t *testing.T) {
	port := freePort(t)
	envs := []func(string) string{torchrunTask(0, 3, port, 1, "2s"), torchrunTask(1, 3, port, 1, "2s")} // rank 2 never starts
	start := time.Now()
	jobs, errs := joinAll(envs)
	defer closeAll(t, jobs)
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Join returned after %v, with a start timeout of 2s", d)
	}
	for r, err := range errs {
		if err == nil {
			t.Fatalf("rank %d joined a job whose server never came", r)
		}
		if !strings.Contains(err.Error(), "rank 2") && !strings.Contains(err.Error(), "ranks 2") {
			t.Errorf("rank %d: %v does not name the missing rank 2", r, err)
		}
	}
	if !strings.Contains(errs[0].Error(), "ps: chief (rank 0)") || !strings.Contains(errs[0].Error(), "did not start within 2s") {
		t.Errorf("chief: %v", errs[0])
	}
}

// TestJoinNotATask: a process of no PS job, and the evaluator, are errors.
func TestJoinNotATask(t *testing.T) {
	for name, tt := range map[string]struct {
		env  []string
		want string
	}{
		"alone":        {nil, "no task of a parameter-server job"},
		"evaluator":    {[]string{jobenv.EnvRole + "=evaluator"}, "evaluator.Run"},
		"malformed":    {[]string{jobenv.EnvPSServers + "=3"}, "need at least 5 processes"},
		"TF evaluator": {[]string{`TF_CONFIG={"cluster":{"chief":["c:1"],"worker":["w:1"],"ps":["p:1"],"evaluator":["e:1"]},"task":{"type":"evaluator","index":0}}`}, "its tfconfig task"},
	} {
		t.Run(name, func(t *testing.T) {
			j, err := Join(context.Background(), getenvOf(tt.env...))
			if err == nil {
				j.Close()
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), "ps: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v: want one naming %q", err, tt.want)
			}
		})
	}
}

// TestJoinTLS: with GOROVOD_TLS=1 the tasks meet through a rendezvous
// that runs inside TLS, and every Job says TLS.
func TestJoinTLS(t *testing.T) {
	port := freePort(t)
	envs := make([]func(string) string, 3)
	for r := range envs {
		base := torchrunTask(r, 3, port, 1, "30s")
		envs[r] = func(k string) string {
			if k == jobenv.EnvTLS {
				return "1"
			}
			return base(k)
		}
	}
	jobs, errs := joinAll(envs)
	defer closeAll(t, jobs)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		if !jobs[r].TLS {
			t.Errorf("rank %d: TLS off", r)
		}
	}
	checkAgree(t, jobs, 1, 1)
}

// TestJobCloseLeavesListenerInUse: Close closes a Listener nobody accepts
// on, and leaves one that its owner accepts on.
func TestJobCloseLeavesListenerInUse(t *testing.T) {
	for _, accepted := range []bool{false, true} {
		ln, err := listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		got := make(chan error, 1)
		if accepted {
			go func() {
				c, err := ln.Accept()
				if err == nil {
					c.Close()
				}
				got <- err
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			if err := <-got; err != nil {
				t.Fatal(err)
			}
		}
		if err := (&Job{Listener: ln}).Close(); err != nil {
			t.Fatal(err)
		}
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err == nil {
			c.Close()
		}
		if open := err == nil; open != accepted {
			t.Errorf("accepted %v: listener open after Close %v (%v)", accepted, open, err)
		}
	}
}
