package ps

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/auth"
	"go.uber.org/goleak"
)

// Helpers of the parameter-server tests (named ps… so as not to clash
// with other tests of the package).

func psSecret(t testing.TB) []byte {
	t.Helper()
	s := make([]byte, 32)
	if _, err := rand.Read(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func psCtx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// startPS starts n servers on loopback ports with the given staleness
// and stops them at cleanup. hook, if not nil, becomes every server's
// onWait test hook.
func startPS(t testing.TB, n int, secret []byte, staleness int, hook func()) ([]*Server, []string) {
	t.Helper()
	var servers []*Server
	var addrs []string
	for i := range n {
		s, err := NewServer(ServerConfig{Addr: "127.0.0.1:0", Secret: secret, Index: i, Staleness: staleness})
		if err != nil {
			t.Fatalf("NewServer: %v", err)
		}
		s.onWait = hook
		if err := s.Start(); err != nil {
			t.Fatalf("Start: %v", err)
		}
		t.Cleanup(s.Stop)
		servers = append(servers, s)
		addrs = append(addrs, s.Addr())
	}
	return servers, addrs
}

func dialPS(t testing.TB, addrs []string, cfg ClientConfig) *Client {
	t.Helper()
	c, err := DialServers(psCtx(t, 10*time.Second), addrs, cfg)
	if err != nil {
		t.Fatalf("DialServers: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func psRandom(seed uint64, n int) []float64 {
	r := mrand.New(mrand.NewPCG(seed, 1))
	out := make([]float64, n)
	for i := range out {
		out[i] = r.NormFloat64()
	}
	return out
}

// psModel is a model with a large variable (800 KB: split across the
// servers by MinSizePartitioner(256 KiB, servers)), a middle one and a
// small one.
func psModel() []Variable {
	return []Variable{
		{Name: "dense/kernel", Shape: []int{1000, 100}, Value: psRandom(1, 100000)},
		{Name: "embedding", Shape: []int{300, 64}, Value: psRandom(2, 300*64)},
		{Name: "dense/bias", Shape: []int{100}, Value: psRandom(3, 100)},
	}
}

func psMinSize(t testing.TB, servers int) Partitioner {
	t.Helper()
	p, err := MinSizePartitioner(256<<10, servers)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func psFixed(t testing.TB, n int) Partitioner {
	t.Helper()
	p, err := FixedShardsPartitioner(n)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var psSGD1 = Optimizer{Kind: OptimizerSGD, LR: 1}

func TestServerCreateAttachPull(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprint(n, "servers"), func(t *testing.T) {
			secret := psSecret(t)
			_, addrs := startPS(t, n, secret, 0, nil)
			chief := dialPS(t, addrs, ClientConfig{Secret: secret, WorkerID: -1})
			worker := dialPS(t, addrs, ClientConfig{Secret: secret, WorkerID: 0})
			ctx := psCtx(t, 20*time.Second)
			vars := psModel()
			if err := chief.Create(ctx, vars, psMinSize(t, n), psSGD1); err != nil {
				t.Fatalf("Create: %v", err)
			}
			if err := worker.Attach(ctx); err != nil {
				t.Fatalf("Attach: %v", err)
			}
			info := worker.Variables()
			if len(info) != len(vars) {
				t.Fatalf("Variables: %d, want %d", len(info), len(vars))
			}
			on := map[int]bool{}
			for i, v := range info {
				if v.Name != vars[i].Name || fmt.Sprint(v.Shape) != fmt.Sprint(vars[i].Shape) {
					t.Errorf("variable %d: %s %v, want %s %v", i, v.Name, v.Shape, vars[i].Name, vars[i].Shape)
				}
			}
			for _, sh := range info[0].Shards {
				on[sh.Server] = true
			}
			if len(info[0].Shards) != n || len(on) != n {
				t.Fatalf("the large variable has shards %+v, want one on each of %d servers", info[0].Shards, n)
			}
			if fmt.Sprint(info) != fmt.Sprint(chief.Variables()) {
				t.Errorf("Attach learned %v, Create made %v", info, chief.Variables())
			}
			dst := map[string][]float64{"dense/bias": make([]float64, 3)} // too short: replaced
			step, err := worker.Pull(ctx, dst)
			if err != nil {
				t.Fatalf("Pull: %v", err)
			}
			if step != 0 {
				t.Errorf("step %d before any push, want 0", step)
			}
			for _, v := range vars {
				got := dst[v.Name]
				if len(got) != len(v.Value) {
					t.Fatalf("%s: pulled %d values, want %d", v.Name, len(got), len(v.Value))
				}
				for i := range got {
					if got[i] != v.Value[i] {
						t.Fatalf("%s[%d] = %v, want %v", v.Name, i, got[i], v.Value[i])
					}
				}
			}
			// Creating again with the same layout is a no-op; another
			// layout is refused.
			if err := chief.Create(ctx, vars, psMinSize(t, n), psSGD1); err != nil {
				t.Errorf("second Create with the same layout: %v", err)
			}
			err = chief.Create(ctx, vars, psFixed(t, 1), psSGD1)
			if !errors.Is(err, ErrLayout) {
				t.Errorf("Create with another layout: %v, want ErrLayout", err)
			}
			err = chief.Create(ctx, vars, psMinSize(t, n), Optimizer{Kind: OptimizerSGD, LR: 0.5})
			if !errors.Is(err, ErrLayout) {
				t.Errorf("Create with another optimizer: %v, want ErrLayout", err)
			}
		})
	}
}

// TestServerAttachWaitsForCreate: Attach started before Create returns
// once Create has run; on servers without variables it ends with ctx.
func TestServerAttachWaitsForCreate(t *testing.T) {
	secret := psSecret(t)
	_, addrs := startPS(t, 2, secret, 0, nil)
	chief := dialPS(t, addrs, ClientConfig{Secret: secret, WorkerID: -1})
	worker := dialPS(t, addrs, ClientConfig{Secret: secret})

	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := worker.Attach(short)
	if !errors.Is(err, ErrNotCreated) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Attach before Create: %v, want ErrNotCreated and the deadline", err)
	}
	if _, err := worker.Pull(psCtx(t, 5*time.Second), map[string][]float64{}); !errors.Is(err, ErrNotCreated) {
		t.Fatalf("Pull before Attach: %v, want ErrNotCreated", err)
	}

	ctx := psCtx(t, 20*time.Second)
	attached := make(chan error, 1)
	go func() { attached <- worker.Attach(ctx) }()
	if err := chief.Create(ctx, psModel(), psMinSize(t, 2), psSGD1); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := <-attached; err != nil {
		t.Fatalf("Attach: %v", err)
	}
	if len(worker.Variables()) != 3 {
		t.Fatalf("Variables after Attach: %v", worker.Variables())
	}
}

// TestServerAttachLayoutMismatch: servers that hold different optimizers
// (a misconfigured job) fail Attach with ErrLayout.
func TestServerAttachLayoutMismatch(t *testing.T) {
	secret := psSecret(t)
	_, addrs := startPS(t, 2, secret, 0, nil)
	chief := dialPS(t, addrs, ClientConfig{Secret: secret, WorkerID: -1})
	ctx := psCtx(t, 20*time.Second)
	wl := srvLayoutWire{Servers: 2, Vars: []srvVarWire{{Name: "w", Shape: []int{2}, Shards: []srvShardWire{{0, 1, 0}, {1, 2, 1}}}}}
	for i, lr := range []float64{0.1, 0.2} {
		req := &srvCreateReq{Index: i, Layout: wl, Opt: Optimizer{Kind: OptimizerSGD, LR: lr}, Values: make([]byte, 8)}
		if _, err := chief.call(ctx, chief.servers[i], "Create", req, time.Minute); err != nil {
			t.Fatalf("Create on server %d: %v", i, err)
		}
	}
	if err := chief.Attach(ctx); !errors.Is(err, ErrLayout) {
		t.Fatalf("Attach: %v, want ErrLayout", err)
	}
}

// TestServerIndexMismatch: a client whose address list has the servers
// in another order is refused by Create and by Attach.
func TestServerIndexMismatch(t *testing.T) {
	secret := psSecret(t)
	_, addrs := startPS(t, 2, secret, 0, nil)
	ctx := psCtx(t, 20*time.Second)
	good := dialPS(t, addrs, ClientConfig{Secret: secret, WorkerID: -1})
	swapped := dialPS(t, []string{addrs[1], addrs[0]}, ClientConfig{Secret: secret, WorkerID: -1})
	if err := swapped.Create(ctx, psModel(), psMinSize(t, 2), psSGD1); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "this is server") {
		t.Fatalf("Create in the wrong order: %v, want ErrBadRequest naming the index", err)
	}
	if err := good.Create(ctx, psModel(), psMinSize(t, 2), psSGD1); err != nil {
		t.Fatal(err)
	}
	if err := swapped.Attach(ctx); !errors.Is(err, ErrLayout) {
		t.Fatalf("Attach in the wrong order: %v, want ErrLayout", err)
	}
}

// adamRef is Adam written out from its definition, for one element.
type adamRef struct{ m, v float64 }

func (a *adamRef) step(w, g float64, t int, o Optimizer) float64 {
	a.m = o.Beta1*a.m + (1-o.Beta1)*g
	a.v = o.Beta2*a.v + (1-o.Beta2)*g*g
	mhat := a.m / (1 - math.Pow(o.Beta1, float64(t)))
	vhat := a.v / (1 - math.Pow(o.Beta2, float64(t)))
	return w - o.LR*mhat/(math.Sqrt(vhat)+o.Epsilon)
}

func TestServerOptimizers(t *testing.T) {
	cases := []struct {
		name  string
		opt   Optimizer
		exact bool
	}{
		{"sgd", Optimizer{Kind: OptimizerSGD, LR: 0.1}, true},
		{"momentum", Optimizer{Kind: OptimizerSGD, LR: 0.05, Momentum: 0.9}, true},
		{"adam", Optimizer{Kind: OptimizerAdam, LR: 0.01}, false},
		{"adam-explicit", Optimizer{Kind: OptimizerAdam, LR: 0.02, Beta1: 0.8, Beta2: 0.99, Epsilon: 1e-6}, false},
	}
	secret := psSecret(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, addrs := startPS(t, 2, secret, 0, nil)
			c := dialPS(t, addrs, ClientConfig{Secret: secret})
			ctx := psCtx(t, 20*time.Second)
			vars := []Variable{
				{Name: "w", Shape: []int{7, 3}, Value: psRandom(10, 21)},
				{Name: "b", Shape: []int{5}, Value: psRandom(11, 5)},
			}
			if err := c.Create(ctx, vars, psFixed(t, 2), tc.opt); err != nil {
				t.Fatalf("Create: %v", err)
			}
			o := tc.opt.withDefaults()
			want := map[string][]float64{}
			mom := map[string][]float64{}
			adam := map[string][]adamRef{}
			for _, v := range vars {
				want[v.Name] = append([]float64(nil), v.Value...)
				mom[v.Name] = make([]float64, len(v.Value))
				adam[v.Name] = make([]adamRef, len(v.Value))
			}
			const pushes = 4
			for p := 1; p <= pushes; p++ {
				grads := map[string][]float64{}
				for k, v := range vars {
					g := psRandom(uint64(100*p+k), len(v.Value))
					grads[v.Name] = g
					w := want[v.Name]
					for i := range w {
						switch {
						case o.Kind == OptimizerAdam:
							w[i] = adam[v.Name][i].step(w[i], g[i], p, o)
						case o.Momentum != 0:
							mom[v.Name][i] = float64(o.Momentum*mom[v.Name][i]) + g[i]
							w[i] = w[i] - float64(o.LR*mom[v.Name][i])
						default:
							w[i] = w[i] - float64(o.LR*g[i])
						}
					}
				}
				if err := c.Push(ctx, grads); err != nil {
					t.Fatalf("Push %d: %v", p, err)
				}
			}
			got := map[string][]float64{}
			step, err := c.Pull(ctx, got)
			if err != nil {
				t.Fatalf("Pull: %v", err)
			}
			if step != pushes {
				t.Errorf("step %d, want %d", step, pushes)
			}
			for name, w := range want {
				for i := range w {
					g := got[name][i]
					if tc.exact && g != w[i] || !tc.exact && math.Abs(g-w[i]) > 1e-12*math.Max(1, math.Abs(w[i])) {
						t.Fatalf("%s[%d] = %.17g, want %.17g", name, i, g, w[i])
					}
				}
			}
		})
	}
}

// TestServerConcurrentPushes: four workers push gradient 1 with SGD of
// learning rate 1 at once; after P pushes every element is exactly P
// lower (no update lost) and the step is P.
func TestServerConcurrentPushes(t *testing.T) {
	secret := psSecret(t)
	_, addrs := startPS(t, 2, secret, 0, nil)
	ctx := psCtx(t, 60*time.Second)
	// Integer values, so that x-P is exact in float64.
	big := make([]float64, 40*25)
	for i := range big {
		big[i] = float64(i%97 - 40)
	}
	vars := []Variable{
		{Name: "big", Shape: []int{40, 25}, Value: big},
		{Name: "small", Shape: []int{3}, Value: []float64{1, 2, 3}},
	}
	chief := dialPS(t, addrs, ClientConfig{Secret: secret, WorkerID: -1})
	if err := chief.Create(ctx, vars, psFixed(t, 2), psSGD1); err != nil {
		t.Fatal(err)
	}
	const workers, each = 4, 25
	ones := map[string][]float64{}
	for _, v := range vars {
		g := make([]float64, len(v.Value))
		for i := range g {
			g[i] = 1
		}
		ones[v.Name] = g
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		c := dialPS(t, addrs, ClientConfig{Secret: secret, WorkerID: w})
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Attach(ctx); err != nil {
				errs <- err
				return
			}
			dst := map[string][]float64{}
			for range each {
				if err := c.Push(ctx, ones); err != nil {
					errs <- err
					return
				}
				if _, err := c.Pull(ctx, dst); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := map[string][]float64{}
	step, err := chief.Pull(ctx, got)
	if err != nil {
		t.Fatal(err)
	}
	if step != workers*each {
		t.Errorf("step %d, want %d", step, workers*each)
	}
	for _, v := range vars {
		for i, x := range got[v.Name] {
			if want := v.Value[i] - workers*each; x != want {
				t.Fatalf("%s[%d] = %v, want %v", v.Name, i, x, want)
			}
		}
	}
}

func TestServerWrongSecret(t *testing.T) {
	secret := psSecret(t)
	_, addrs := startPS(t, 2, secret, 0, nil)
	_, err := DialServers(psCtx(t, 20*time.Second), addrs, ClientConfig{Secret: psSecret(t)})
	var se *ServerError
	if !errors.As(err, &se) || !errors.Is(err, ErrAuth) {
		t.Fatalf("DialServers with a wrong secret: %v, want a ServerError wrapping ErrAuth", err)
	}
	if se.Addr != addrs[se.Index] || !strings.Contains(err.Error(), fmt.Sprintf("parameter server %d (%s)", se.Index, se.Addr)) {
		t.Errorf("error %q does not name server %d at %s", err, se.Index, se.Addr)
	}
	_, err = DialServers(psCtx(t, 20*time.Second), addrs, ClientConfig{Secret: secret, TLS: true})
	if !errors.As(err, &se) || !errors.Is(err, ErrAuth) {
		t.Fatalf("DialServers with TLS against clear servers: %v, want a ServerError wrapping ErrAuth", err)
	}
}

func TestServerTLS(t *testing.T) {
	secret := psSecret(t)
	s, err := NewServer(ServerConfig{Addr: "127.0.0.1:0", Secret: secret, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	c := dialPS(t, []string{s.Addr()}, ClientConfig{Secret: secret, TLS: true})
	ctx := psCtx(t, 20*time.Second)
	vars := psModel()
	if err := c.Create(ctx, vars, psMinSize(t, 1), psSGD1); err != nil {
		t.Fatal(err)
	}
	got := map[string][]float64{}
	if _, err := c.Pull(ctx, got); err != nil {
		t.Fatal(err)
	}
	if got["dense/kernel"][99999] != vars[0].Value[99999] {
		t.Fatal("value changed on its way through TLS")
	}
}

func TestServerBadRequests(t *testing.T) {
	secret := psSecret(t)
	_, addrs := startPS(t, 2, secret, 0, nil)
	c := dialPS(t, addrs, ClientConfig{Secret: secret, WorkerID: -1})
	ctx := psCtx(t, 20*time.Second)
	vars := []Variable{{Name: "w", Shape: []int{4, 2}, Value: make([]float64, 8)}, {Name: "b", Shape: []int{2}, Value: make([]float64, 2)}}

	// Refused by the client before anything is sent.
	for _, tc := range []struct {
		name string
		vars []Variable
		opt  Optimizer
	}{
		{"no variables", nil, psSGD1},
		{"short value", []Variable{{Name: "w", Shape: []int{4, 2}, Value: make([]float64, 7)}}, psSGD1},
		{"bad shape", []Variable{{Name: "w", Shape: []int{4, 0}}}, psSGD1},
		{"unknown optimizer", vars, Optimizer{Kind: "rmsprop", LR: 1}},
		{"zero learning rate", vars, Optimizer{Kind: OptimizerSGD}},
		{"negative momentum", vars, Optimizer{Kind: OptimizerSGD, LR: 1, Momentum: -0.1}},
		{"adam beta of 1", vars, Optimizer{Kind: OptimizerAdam, LR: 1, Beta1: 1}},
		{"NaN learning rate", vars, Optimizer{Kind: OptimizerAdam, LR: math.NaN()}},
	} {
		if err := c.Create(ctx, tc.vars, psFixed(t, 2), tc.opt); !errors.Is(err, ErrBadRequest) {
			t.Errorf("Create with %s: %v, want ErrBadRequest", tc.name, err)
		}
	}
	if err := c.Create(ctx, vars, psFixed(t, 2), psSGD1); err != nil {
		t.Fatal(err)
	}
	for name, grads := range map[string]map[string][]float64{
		"missing variable": {"w": make([]float64, 8)},
		"unknown variable": {"w": make([]float64, 8), "b": make([]float64, 2), "x": {1}},
		"short gradient":   {"w": make([]float64, 7), "b": make([]float64, 2)},
		"long gradient":    {"w": make([]float64, 8), "b": make([]float64, 3)},
	} {
		if err := c.Push(ctx, grads); !errors.Is(err, ErrBadRequest) {
			t.Errorf("Push with a %s: %v, want ErrBadRequest", name, err)
		}
		if err := c.Load(ctx, grads, 1); !errors.Is(err, ErrBadRequest) {
			t.Errorf("Load with a %s: %v, want ErrBadRequest", name, err)
		}
	}
	if _, err := c.Pull(ctx, nil); !errors.Is(err, ErrBadRequest) {
		t.Errorf("Pull into a nil map: %v", err)
	}

	// Refused by the server: requests a client of this package would not
	// send, sent through its connection.
	sc := c.servers[1]
	wl := c.layout.wire
	for _, tc := range []struct {
		method string
		req    any
	}{
		{"Push", &srvPushReq{Worker: -1, Grads: make([]byte, 7)}},
		{"Push", &srvPushReq{Worker: -1, Grads: make([]byte, 8*100)}},
		{"Push", &srvPushReq{Worker: srvMaxWorkerID, Grads: make([]byte, 8*c.layout.bytes[1])}},
		{"Push", &srvPushReq{Worker: -2}},
		{"Load", &srvLoadReq{Values: make([]byte, 3)}},
		{"Load", &srvLoadReq{Values: make([]byte, 8*c.layout.bytes[1]/8), Step: -1}},
		{"Pull", &srvPullReq{Worker: -7}},
		{"Drop", &srvWorkerReq{Worker: 1 << 20}},
		{"Create", &srvCreateReq{Index: 0, Layout: wl, Opt: psSGD1}},
		{"Create", &srvCreateReq{Index: 1, Layout: wl, Opt: psSGD1, Values: make([]byte, 1)}},
		{"Create", &srvCreateReq{Index: 1, Layout: srvLayoutWire{Servers: 2}, Opt: psSGD1}},
		{"Create", &srvCreateReq{Index: 1, Layout: wl, Opt: Optimizer{Kind: "sgd", LR: -1}}},
	} {
		_, err := c.call(ctx, sc, tc.method, tc.req, 10*time.Second)
		var se *ServerError
		if !errors.Is(err, ErrBadRequest) || errors.As(err, &se) || !strings.Contains(err.Error(), "parameter server 1") {
			t.Errorf("%s %+v: %v, want ErrBadRequest naming server 1 (not a ServerError)", tc.method, tc.req, err)
		}
	}
	// The state is intact: a valid push still applies.
	ones := map[string][]float64{"w": {1, 1, 1, 1, 1, 1, 1, 1}, "b": {1, 1}}
	if err := c.Push(ctx, ones); err != nil {
		t.Fatal(err)
	}
	got := map[string][]float64{}
	if step, err := c.Pull(ctx, got); err != nil || step != 1 || got["w"][7] != -1 || got["b"][0] != -1 {
		t.Fatalf("after the refused requests: step %d, %v, %v", step, got, err)
	}
}

func TestSrvCheckLayout(t *testing.T) {
	ok := func() srvLayoutWire {
		return srvLayoutWire{Servers: 2, Vars: []srvVarWire{
			{Name: "w", Shape: []int{4, 3}, Shards: []srvShardWire{{0, 2, 0}, {2, 4, 1}}},
			{Name: "b", Shape: []int{3}, Shards: []srvShardWire{{0, 3, 1}}},
		}}
	}
	l := ok()
	if sizes, err := srvCheckLayout(&l, 1); err != nil || fmt.Sprint(sizes) != "[6 3]" {
		t.Fatalf("valid layout: %v %v", sizes, err)
	}
	many := make([]srvVarWire, srvMaxVars+1)
	for i := range many {
		many[i] = srvVarWire{Name: fmt.Sprint(i), Shape: []int{1}, Shards: []srvShardWire{{0, 1, 0}}}
	}
	for name, mutate := range map[string]func(*srvLayoutWire){
		"no variables":        func(l *srvLayoutWire) { l.Vars = nil },
		"too many variables":  func(l *srvLayoutWire) { l.Vars = many },
		"index beyond":        func(l *srvLayoutWire) { l.Servers = 1 },
		"empty name":          func(l *srvLayoutWire) { l.Vars[0].Name = "" },
		"long name":           func(l *srvLayoutWire) { l.Vars[0].Name = strings.Repeat("x", srvMaxNameLen+1) },
		"repeated name":       func(l *srvLayoutWire) { l.Vars[1].Name = "w" },
		"scalar":              func(l *srvLayoutWire) { l.Vars[1].Shape = nil },
		"too many dimensions": func(l *srvLayoutWire) { l.Vars[1].Shape = make([]int, srvMaxDims+1) },
		"zero dimension":      func(l *srvLayoutWire) { l.Vars[0].Shape[1] = 0 },
		"huge row":            func(l *srvLayoutWire) { l.Vars[0].Shape = []int{4, 1 << 40, 1 << 40} },
		"huge server share":   func(l *srvLayoutWire) { l.Vars[0].Shape = []int{4, MaxServerBytes / 8} },
		"no shards":           func(l *srvLayoutWire) { l.Vars[1].Shards = nil },
		"more shards than rows": func(l *srvLayoutWire) {
			l.Vars[1].Shape = []int{1}
			l.Vars[1].Shards = []srvShardWire{{0, 1, 1}, {1, 1, 1}}
		},
		"gap":              func(l *srvLayoutWire) { l.Vars[0].Shards[1].Start = 3 },
		"overlap":          func(l *srvLayoutWire) { l.Vars[0].Shards[1].Start = 1 },
		"short cover":      func(l *srvLayoutWire) { l.Vars[0].Shards[1].End = 3 },
		"beyond rows":      func(l *srvLayoutWire) { l.Vars[0].Shards[1].End = 5 },
		"server beyond":    func(l *srvLayoutWire) { l.Vars[0].Shards[1].Server = 2 },
		"negative server":  func(l *srvLayoutWire) { l.Vars[0].Shards[1].Server = -1 },
		"negative row":     func(l *srvLayoutWire) { l.Vars[0].Shards[0].Start = -1 },
		"negative dim row": func(l *srvLayoutWire) { l.Vars[0].Shape[0] = -4 },
	} {
		l := ok()
		mutate(&l)
		if _, err := srvCheckLayout(&l, 1); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestSrvFrameConnBoundsMessages: a stream of gob messages within the limit
// passes whole, in any read sizes; a length above it, a malformed length
// and (on the server) a compressed stream fail the read.
func TestSrvFrameConnBoundsMessages(t *testing.T) {
	// gob unsigned integers: 5 → 05; 300 → FE 01 2C; 1<<20 → FD 10 00 00.
	msg := func(n int) []byte {
		var b []byte
		switch {
		case n < 128:
			b = []byte{byte(n)}
		case n < 1<<16:
			b = []byte{0xFE, byte(n >> 8), byte(n)}
		default:
			b = []byte{0xFD, byte(n >> 16), byte(n >> 8), byte(n)}
		}
		return append(b, make([]byte, n)...)
	}
	var stream []byte
	for _, n := range []int{5, 300, 0, 127, 1000} {
		stream = append(stream, msg(n)...)
	}
	for _, chunk := range []int{1, 2, 7, 1 << 20} {
		f := newSrvFrameConn(nil, 1000, false)
		for b := stream; len(b) > 0; {
			k := min(chunk, len(b))
			if err := f.scan(b[:k]); err != nil {
				t.Fatalf("chunks of %d: %v", chunk, err)
			}
			b = b[k:]
		}
		if f.state != srvFrameCount {
			t.Fatalf("chunks of %d: state %d at the end of whole messages", chunk, f.state)
		}
	}
	if err := newSrvFrameConn(nil, 1000, false).scan(msg(1001)); !errors.Is(err, ErrBadRequest) {
		t.Errorf("message over the limit: %v", err)
	}
	if err := newSrvFrameConn(nil, 1<<30, false).scan([]byte{0xF7, 1, 2, 3, 4, 5, 6, 7, 8, 9}); err == nil {
		t.Error("a 9-byte length passed")
	}
	if err := newSrvFrameConn(nil, 1<<30, false).scan([]byte{0xF8, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}); err == nil {
		t.Error("a length above MaxInt64 passed")
	}
	if err := newSrvFrameConn(nil, 1000, true).scan(append([]byte{1}, msg(5)...)); err == nil {
		t.Error("a compressed stream passed the server's check")
	}
	if err := newSrvFrameConn(nil, 1000, true).scan(append([]byte{0}, msg(5)...)); err != nil {
		t.Errorf("an uncompressed stream: %v", err)
	}
}

// TestServerRefusesOversizedMessage: an authenticated peer that announces
// a message above the limit loses its connection before the server reads
// (or allocates) it; one that announces a message within the limit is
// waited for; the server goes on serving.
func TestServerRefusesOversizedMessage(t *testing.T) {
	secret := psSecret(t)
	_, addrs := startPS(t, 1, secret, 0, nil)
	guard, err := auth.NewGuard(secret, false)
	if err != nil {
		t.Fatal(err)
	}
	send := func(length uint32) net.Conn {
		t.Helper()
		conn, err := net.Dial("tcp", addrs[0])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		stream, _, err := guard.Client(conn, []byte(srvHelloClient), time.Now().Add(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		// gorpc's flag byte (no compression), then a gob message length.
		hdr := []byte{0, 0xFC, byte(length >> 24), byte(length >> 16), byte(length >> 8), byte(length)}
		if _, err := stream.Write(hdr); err != nil {
			t.Fatal(err)
		}
		return stream
	}
	over := send(srvMaxMessage + 1)
	over.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := over.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("after an oversized length: read %v, want the server to close (EOF)", err)
	}
	within := send(1000)
	within.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := within.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after a length within the limit: read %v, want the server to wait for the body", err)
	}
	c := dialPS(t, addrs, ClientConfig{Secret: secret})
	if err := c.Ping(psCtx(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// TestServerStaleness: with K=1 a fast worker's Pull waits while it is
// two pushes ahead of the slow one, until the slow one pushes; and again
// until the chief drops the slow one; over the data link and over gorpc.
func TestServerStaleness(t *testing.T) {
	t.Run("data link", func(t *testing.T) { serverStaleness(t, false) })
	t.Run("gorpc", func(t *testing.T) { serverStaleness(t, true) })
}

func serverStaleness(t *testing.T, noData bool) {
	secret := psSecret(t)
	waits := make(chan struct{}, 1024)
	hook := func() {
		select {
		case waits <- struct{}{}:
		default:
		}
	}
	_, addrs := startPS(t, 2, secret, 1, hook)
	ctx := psCtx(t, 60*time.Second)
	chief := dialPS(t, addrs, ClientConfig{Secret: secret, WorkerID: -1})
	fast := dialPS(t, addrs, ClientConfig{Secret: secret, WorkerID: 0, noDataLink: noData})
	slow := dialPS(t, addrs, ClientConfig{Secret: secret, WorkerID: 1, noDataLink: noData})
	vars := []Variable{{Name: "w", Shape: []int{4}, Value: make([]float64, 4)}}
	if err := chief.Create(ctx, vars, psFixed(t, 2), psSGD1); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Client{fast, slow} {
		if err := c.Attach(ctx); err != nil {
			t.Fatal(err)
		}
	}
	dst := map[string][]float64{}
	if _, err := slow.Pull(ctx, dst); err != nil { // the slow worker counts from now, at clock 0
		t.Fatal(err)
	}
	grad := map[string][]float64{"w": {1, 1, 1, 1}}
	push := func(c *Client) {
		t.Helper()
		if err := c.Push(ctx, grad); err != nil {
			t.Fatal(err)
		}
	}
	// One ahead is within the bound: no wait.
	push(fast)
	if _, err := fast.Pull(ctx, dst); err != nil {
		t.Fatal(err)
	}
	if len(waits) != 0 {
		t.Fatalf("a Pull one push ahead waited")
	}
	pullAsync := func() chan error {
		done := make(chan error, 1)
		go func() {
			_, err := fast.Pull(ctx, map[string][]float64{})
			done <- err
		}()
		return done
	}
	// Two ahead: the Pull waits on both servers until the slow one pushes.
	push(fast)
	done := pullAsync()
	<-waits
	<-waits
	select {
	case err := <-done:
		t.Fatalf("Pull two pushes ahead returned (%v) without waiting", err)
	default:
	}
	push(slow)
	if err := <-done; err != nil {
		t.Fatalf("Pull after the slow worker pushed: %v", err)
	}
	// Two ahead again (3 against 1): Drop releases it.
	push(fast)
	for len(waits) > 0 {
		<-waits
	}
	done = pullAsync()
	<-waits
	<-waits
	select {
	case err := <-done:
		t.Fatalf("Pull two pushes ahead returned (%v) without waiting", err)
	default:
	}
	if err := chief.Drop(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Pull after Drop: %v", err)
	}
	// The chief is no worker: it never waits.
	if _, err := chief.Pull(ctx, dst); err != nil {
		t.Fatal(err)
	}
}

// TestServerStalenessUnheardWorker: a worker unheard for the op timeout
// stops holding the others back.
func TestServerStalenessUnheardWorker(t *testing.T) {
	c := newSrvClocks(1, 50*time.Millisecond)
	stop := make(chan struct{})
	if ok, _ := c.await(1, 0, stop, nil); !ok { // worker 1 is heard at clock 0
		t.Fatal("first Pull waited")
	}
	c.push(0)
	c.push(0)
	start := time.Now()
	ok, err := c.await(0, 10*time.Second, stop, nil)
	if !ok || err != nil {
		t.Fatalf("await: %v %v", ok, err)
	}
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Fatalf("returned after %s, before worker 1 timed out", d)
	}
	// A late worker starts at the slowest active clock, holding nobody.
	c.push(0)
	if ok, _ := c.await(5, 0, stop, nil); !ok {
		t.Fatal("a new worker waited")
	}
	if ok, _ := c.await(0, 0, stop, nil); !ok {
		t.Fatal("a new worker held worker 0 back")
	}
	close(stop)
	c.push(0)
	c.push(0)
	c.push(0)
	if _, err := c.await(0, time.Minute, stop, nil); !errors.Is(err, ErrStopped) {
		t.Fatalf("await on a stopped server: %v", err)
	}
}

func TestServerShutdownEndsServe(t *testing.T) {
	secret := psSecret(t)
	var addrs []string
	served := make(chan error, 2)
	for i := range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, l.Addr().String())
		go func() { served <- Serve(context.Background(), ServerConfig{Listener: l, Secret: secret, Index: i}) }()
	}
	c := dialPS(t, addrs, ClientConfig{Secret: secret, WorkerID: -1})
	if err := c.Shutdown(psCtx(t, 20*time.Second)); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	c.Close()
	for range 2 {
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Serve still running 20s after Shutdown")
		}
	}

	s, addr := startPS(t, 1, secret, 0, nil)
	c = dialPS(t, addr, ClientConfig{Secret: secret})
	select {
	case <-s[0].Done():
		t.Fatal("Done closed before Shutdown")
	default:
	}
	if err := c.Shutdown(psCtx(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	<-s[0].Done()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Serve(ctx, ServerConfig{Addr: "127.0.0.1:0", Secret: secret}); !errors.Is(err, context.Canceled) {
		t.Errorf("Serve with an ended context: %v", err)
	}
}

// TestServerLoad: Load sets values and the step, and zeroes the
// optimizer's slots (a momentum push after it is a plain step).
func TestServerLoad(t *testing.T) {
	secret := psSecret(t)
	_, addrs := startPS(t, 2, secret, 0, nil)
	c := dialPS(t, addrs, ClientConfig{Secret: secret, WorkerID: -1})
	ctx := psCtx(t, 20*time.Second)
	vars := psModel()
	opt := Optimizer{Kind: OptimizerSGD, LR: 0.5, Momentum: 0.9}
	if err := c.Create(ctx, vars, psMinSize(t, 2), opt); err != nil {
		t.Fatal(err)
	}
	grads := map[string][]float64{}
	loaded := map[string][]float64{}
	for k, v := range vars {
		grads[v.Name] = psRandom(uint64(50+k), len(v.Value))
		loaded[v.Name] = psRandom(uint64(60+k), len(v.Value))
	}
	for range 3 { // build up momentum
		if err := c.Push(ctx, grads); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Load(ctx, loaded, 42); err != nil {
		t.Fatal(err)
	}
	got := map[string][]float64{}
	step, err := c.Pull(ctx, got)
	if err != nil || step != 42 {
		t.Fatalf("Pull after Load: step %d, %v; want 42", step, err)
	}
	for name, want := range loaded {
		if fmt.Sprint(got[name]) != fmt.Sprint(want) {
			t.Fatalf("%s after Load differs", name)
		}
	}
	if err := c.Push(ctx, grads); err != nil {
		t.Fatal(err)
	}
	if step, err = c.Pull(ctx, got); err != nil || step != 43 {
		t.Fatalf("Pull after a push: step %d, %v; want 43", step, err)
	}
	for name, w := range loaded {
		for i := range w {
			if want := w[i] - float64(0.5*grads[name][i]); got[name][i] != want {
				t.Fatalf("%s[%d] = %v, want %v (momentum not reset by Load?)", name, i, got[name][i], want)
			}
		}
	}
}

// TestServerKilled: with one of two servers stopped, Push and Ping fail
// within the call timeout with a ServerError naming server 1.
func TestServerKilled(t *testing.T) {
	secret := psSecret(t)
	servers, addrs := startPS(t, 2, secret, 0, nil)
	const callTimeout = time.Second
	c := dialPS(t, addrs, ClientConfig{Secret: secret, CallTimeout: callTimeout})
	ctx := psCtx(t, time.Minute)
	vars := psModel()
	if err := c.Create(ctx, vars, psMinSize(t, 2), psSGD1); err != nil {
		t.Fatal(err)
	}
	servers[1].Stop()
	grads := map[string][]float64{}
	for _, v := range vars {
		grads[v.Name] = make([]float64, len(v.Value))
	}
	for name, op := range map[string]func() error{
		"Push": func() error { return c.Push(ctx, grads) },
		"Pull": func() error { _, err := c.Pull(ctx, map[string][]float64{}); return err },
		"Ping": func() error { return c.Ping(ctx) },
	} {
		start := time.Now()
		err := op()
		took := time.Since(start)
		var se *ServerError
		if !errors.As(err, &se) || se.Index != 1 || se.Addr != addrs[1] {
			t.Fatalf("%s with server 1 stopped: %v, want a ServerError for server 1", name, err)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("ps: parameter server 1 (%s)", addrs[1])) {
			t.Errorf("%s: %q does not name server 1 and its address", name, err)
		}
		if took > callTimeout+5*time.Second {
			t.Errorf("%s took %s, want within the call timeout %s (and slack)", name, took, callTimeout)
		}
	}
}

func TestServerErrorText(t *testing.T) {
	err := error(&ServerError{Index: 3, Addr: "10.0.0.4:7000", Err: fmt.Errorf("%w: Push: connection reset", ErrUnreachable)})
	want := "ps: parameter server 3 (10.0.0.4:7000): parameter server unreachable: Push: connection reset"
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
	if !errors.Is(fmt.Errorf("step: %w", err), ErrUnreachable) {
		t.Error("errors.Is does not see the sentinel")
	}
}

// TestServerStopLeavesNoGoroutines: servers and clients that were used
// leave no goroutine behind once stopped and closed.
func TestServerStopLeavesNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	secret := psSecret(t)
	var servers []*Server
	var addrs []string
	for i := range 2 {
		s, err := NewServer(ServerConfig{Addr: "127.0.0.1:0", Secret: secret, Index: i, Staleness: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		servers = append(servers, s)
		addrs = append(addrs, s.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := DialServers(ctx, addrs, ClientConfig{Secret: secret, WorkerID: 0})
	if err != nil {
		t.Fatal(err)
	}
	vars := psModel()
	if err := c.Create(ctx, vars, psMinSize(t, 2), psSGD1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pull(ctx, map[string][]float64{}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c.Close()
	for _, s := range servers {
		s.Stop()
		s.Stop()
	}
	// A server stopped without Start, and one whose listener came from
	// outside, leave nothing either.
	s, err := NewServer(ServerConfig{Addr: "127.0.0.1:0", Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if err := s.Start(); !errors.Is(err, ErrStopped) {
		t.Errorf("Start after Stop: %v", err)
	}
}

func TestServerConfigErrors(t *testing.T) {
	secret := psSecret(t)
	for name, cfg := range map[string]ServerConfig{
		"no address":         {Secret: secret},
		"short secret":       {Addr: "127.0.0.1:0", Secret: secret[:16]},
		"negative index":     {Addr: "127.0.0.1:0", Secret: secret, Index: -1},
		"negative staleness": {Addr: "127.0.0.1:0", Secret: secret, Staleness: -1},
		"negative timeout":   {Addr: "127.0.0.1:0", Secret: secret, OpTimeout: -1},
	} {
		if _, err := NewServer(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	ctx := psCtx(t, 5*time.Second)
	for name, tc := range map[string]struct {
		addrs []string
		cfg   ClientConfig
	}{
		"no servers":     {nil, ClientConfig{Secret: secret}},
		"empty address":  {[]string{""}, ClientConfig{Secret: secret}},
		"short secret":   {[]string{"127.0.0.1:1"}, ClientConfig{Secret: secret[:3]}},
		"worker id":      {[]string{"127.0.0.1:1"}, ClientConfig{Secret: secret, WorkerID: -2}},
		"negative timer": {[]string{"127.0.0.1:1"}, ClientConfig{Secret: secret, CallTimeout: -1}},
	} {
		if _, err := DialServers(ctx, tc.addrs, tc.cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	// Nobody listens: a ServerError once ctx ends.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = DialServers(short, []string{dead}, ClientConfig{Secret: secret})
	var se *ServerError
	if !errors.As(err, &se) || se.Index != 0 || !errors.Is(err, ErrUnreachable) {
		t.Errorf("DialServers to nobody: %v, want a ServerError wrapping ErrUnreachable", err)
	}
}

// BenchmarkPullPush: one Push and one Pull of a 100,000-element float64
// model (800 KB) split across two in-process servers.
func BenchmarkPullPush(b *testing.B) {
	for _, w := range []Wire{WireFloat64, WireFloat32} {
		b.Run(w.String(), func(b *testing.B) {
			secret := psSecret(b)
			_, addrs := startPS(b, 2, secret, 0, nil)
			c := dialPS(b, addrs, ClientConfig{Secret: secret, Wire: w})
			ctx := context.Background()
			vars := []Variable{{Name: "w", Shape: []int{1000, 100}, Value: psRandom(1, 100000)}}
			if err := c.Create(ctx, vars, psMinSize(b, 2), Optimizer{Kind: OptimizerSGD, LR: 1e-9}); err != nil {
				b.Fatal(err)
			}
			grads := map[string][]float64{"w": psRandom(2, 100000)}
			dst := map[string][]float64{}
			b.SetBytes(2 * 8 * 100000) // the model's float64 bytes, both ways, whatever the wire
			b.ResetTimer()
			for b.Loop() {
				if err := c.Push(ctx, grads); err != nil {
					b.Fatal(err)
				}
				if _, err := c.Pull(ctx, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
