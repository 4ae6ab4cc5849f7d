package ps

import (
	"encoding/binary"
	"io"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/auth"
)

// psLinked says whether every server of c has a data link.
func psLinked(c *Client) bool {
	for _, sc := range c.servers {
		sc.data.mu.Lock()
		up := sc.data.conn != nil
		sc.data.mu.Unlock()
		if !up {
			return false
		}
	}
	return true
}

// TestDataLinkAndGorpcAgree: a client's Pulls and Pushes go over its data
// links, and give exactly what the same operations over gorpc give, for
// both wires: float64 exact, float32 rounded both ways.
func TestDataLinkAndGorpcAgree(t *testing.T) {
	for _, w := range []Wire{WireFloat64, WireFloat32} {
		t.Run(w.String(), func(t *testing.T) {
			got := map[bool]map[string][]float64{}
			for _, noData := range []bool{false, true} {
				secret := psSecret(t)
				servers, addrs := startPS(t, 3, secret, 0, nil)
				ctx := psCtx(t, time.Minute)
				chief := dialPS(t, addrs, ClientConfig{Secret: secret, WorkerID: -1})
				vars := psModel()
				if err := chief.Create(ctx, vars, psMinSize(t, 3), Optimizer{Kind: OptimizerSGD, LR: 0.5, Momentum: 0.9}); err != nil {
					t.Fatal(err)
				}
				worker := dialPS(t, addrs, ClientConfig{Secret: secret, WorkerID: 0, Wire: w, noDataLink: noData})
				if err := worker.Attach(ctx); err != nil {
					t.Fatal(err)
				}
				if psLinked(worker) == noData {
					t.Fatalf("noDataLink %v: data links up = %v", noData, psLinked(worker))
				}
				grads := map[string][]float64{}
				for i, v := range vars {
					grads[v.Name] = psRandom(uint64(10+i), len(v.Value))
				}
				for range 3 {
					if err := worker.Push(ctx, grads); err != nil {
						t.Fatal(err)
					}
				}
				dst := map[string][]float64{}
				step, err := worker.Pull(ctx, dst)
				if err != nil || step != 3 {
					t.Fatalf("Pull: step %d, %v; want 3", step, err)
				}
				// What a float32 wire does: each gradient rounded to float32
				// on the way in, the values rounded on the way out.
				for _, v := range vars {
					m := make([]float64, len(v.Value))
					want := append([]float64(nil), v.Value...)
					for range 3 {
						for i := range want {
							g := grads[v.Name][i]
							if w == WireFloat32 {
								g = float64(float32(g))
							}
							m[i] = float64(0.9*m[i]) + g
							want[i] -= float64(0.5 * m[i])
						}
					}
					for i := range want {
						if w == WireFloat32 {
							want[i] = float64(float32(want[i]))
						}
						if dst[v.Name][i] != want[i] {
							t.Fatalf("noDataLink %v: %s[%d] = %v, want %v", noData, v.Name, i, dst[v.Name][i], want[i])
						}
					}
				}
				got[noData] = dst
				if !noData {
					linked := 0
					for _, s := range servers {
						linked += s.dataConns.Len()
					}
					if linked < 3 {
						t.Errorf("the servers serve %d data links, want the worker's 3 at least", linked)
					}
				}
			}
		})
	}
}

// TestDataLinkBreaksToGorpc: a data link that breaks fails the call in
// progress with a ServerError, and the next calls go over gorpc.
func TestDataLinkBreaksToGorpc(t *testing.T) {
	secret := psSecret(t)
	servers, addrs := startPS(t, 2, secret, 0, nil)
	ctx := psCtx(t, time.Minute)
	c := dialPS(t, addrs, ClientConfig{Secret: secret})
	if err := c.Create(ctx, psModel(), psMinSize(t, 2), psSGD1); err != nil {
		t.Fatal(err)
	}
	servers[0].dataConns.CloseAll()
	// The first Pull may find the link dead (a ServerError) or notice the
	// close only on its read; either way the one after it works.
	c.Pull(ctx, map[string][]float64{})
	if psLinked(c) {
		t.Fatal("the broken data link is still in use")
	}
	dst := map[string][]float64{}
	if _, err := c.Pull(ctx, dst); err != nil {
		t.Fatalf("Pull over gorpc after the data link broke: %v", err)
	}
	if dst["dense/kernel"][5] != psModel()[0].Value[5] {
		t.Errorf("Pull over gorpc gave %v, want %v", dst["dense/kernel"][5], psModel()[0].Value[5])
	}
}

// psRawDataLink opens an authenticated data link to addr by hand.
func psRawDataLink(t *testing.T, addr string, secret []byte) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	g, err := auth.NewGuard(secret, false)
	if err != nil {
		t.Fatal(err)
	}
	stream, hello, err := g.Client(conn, []byte(srvHelloData), time.Now().Add(5*time.Second))
	if err != nil || string(hello) != srvHelloServer {
		t.Fatalf("handshake: %q, %v", hello, err)
	}
	return stream
}

// TestDataLinkRefusesBadRequests: a request the server cannot trust gets
// an error answer naming what is wrong and the link is closed, before the
// server reads or allocates anything from it; the server serves on.
func TestDataLinkRefusesBadRequests(t *testing.T) {
	secret := psSecret(t)
	_, addrs := startPS(t, 1, secret, 0, nil)
	ctx := psCtx(t, time.Minute)
	c := dialPS(t, addrs, ClientConfig{Secret: secret})
	vars := []Variable{{Name: "w", Shape: []int{8}, Value: psRandom(1, 8)}}
	if err := c.Create(ctx, vars, psFixed(t, 1), psSGD1); err != nil {
		t.Fatal(err)
	}
	header := func(op, wire byte, worker int32, n uint64) []byte {
		h := make([]byte, dataHeader)
		h[0], h[1] = op, wire
		binary.LittleEndian.PutUint32(h[4:], uint32(worker))
		binary.LittleEndian.PutUint64(h[16:], n)
		return h
	}
	for name, tc := range map[string]struct {
		req  []byte
		want string
	}{
		"unknown op":           {header(9, 0, 0, 0), "unknown op 9"},
		"unknown wire":         {header(dataPull, 7, 0, 0), "unknown wire type 7"},
		"worker out of range":  {header(dataPull, 0, 1<<20, 0), "worker id 1048576 out of range"},
		"short push":           {header(dataPush, 0, 0, 16), "Push carries 16 bytes of float64 gradients, server 0 holds 8 values"},
		"endless push":         {header(dataPush, 0, 0, math.MaxUint64), "bytes of float64 gradients"},
		"float32 push as f64":  {header(dataPush, byte(WireFloat32), 0, 64), "Push carries 64 bytes of float32 gradients"},
		"pull with a payload":  {header(dataPull, 0, 0, 8), "a Pull with a 8-byte payload"},
		"padding not zero":     {append([]byte{dataPull, 0, 1}, make([]byte, dataHeader-3)...), "malformed header"},
		"negative worker (-2)": {header(dataPull, 0, -2, 0), "worker id -2 out of range"},
	} {
		conn := psRawDataLink(t, addrs[0], secret)
		conn.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := conn.Write(tc.req); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ans := make([]byte, dataHeader)
		if _, err := io.ReadFull(conn, ans); err != nil {
			t.Fatalf("%s: no answer: %v", name, err)
		}
		n := binary.LittleEndian.Uint64(ans[16:])
		if ans[0] != dataError || n > dataMaxError {
			t.Fatalf("%s: answer status %d with %d bytes, want an error", name, ans[0], n)
		}
		msg := make([]byte, n)
		if _, err := io.ReadFull(conn, msg); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(msg), tc.want) {
			t.Errorf("%s: %q, want it to say %q", name, msg, tc.want)
		}
		if _, err := conn.Read(make([]byte, 1)); err == nil {
			t.Errorf("%s: the link stayed open after a refused request", name)
		}
	}
	dst := map[string][]float64{}
	if _, err := c.Pull(ctx, dst); err != nil || dst["w"][3] != vars[0].Value[3] {
		t.Fatalf("the server after the bad requests: %v, %v", dst["w"], err)
	}
}
