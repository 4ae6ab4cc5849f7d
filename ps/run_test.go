package ps

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestWatchServersFailsTheCoordinator: the chief's watch of the servers
// fails the coordinator with a ServerError naming a server that stopped,
// so that a Join waiting on steps no worker runs ends within about a
// watch period and a call timeout, and says which server it was.
func TestWatchServersFailsTheCoordinator(t *testing.T) {
	secret := psSecret(t)
	servers, addrs := startPS(t, 2, secret, 0, nil)
	client := dialPS(t, addrs, ClientConfig{Secret: secret, WorkerID: -1, CallTimeout: time.Second})
	coord, err := NewCoordinator(CoordinatorConfig{Addr: "127.0.0.1:0", Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	if err := coord.Start(); err != nil {
		t.Fatal(err)
	}
	defer coord.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan *ServerError, 1)
	go func() { watched <- watchServers(ctx, client, coord) }()
	defer cancel()
	rv := coord.Schedule("train", nil) // no worker: it waits until the coordinator fails
	servers[1].Stop()
	start := time.Now()
	jctx, jcancel := context.WithTimeout(context.Background(), time.Minute)
	defer jcancel()
	err = coord.Join(jctx)
	took := time.Since(start)
	var se interface{ PSServer() (int, string) }
	if !errors.As(err, &se) {
		t.Fatalf("Join after server 1 stopped: %v, want an error naming the server", err)
	}
	if i, addr := se.PSServer(); i != 1 || addr != addrs[1] {
		t.Errorf("the error names server %d (%s), want 1 (%s)", i, addr, addrs[1])
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("parameter server 1 (%s)", addrs[1])) {
		t.Errorf("%q does not name server 1 and its address", err)
	}
	if _, err := rv.Wait(jctx); err == nil {
		t.Error("the pending step did not fail")
	}
	if took > serverWatch+time.Second+20*time.Second {
		t.Errorf("Join ended %v after the server stopped, want about a watch period and a call timeout", took)
	}
	if se := <-watched; se == nil || se.Index != 1 {
		t.Errorf("watchServers returned %v, want server 1's ServerError", se)
	}
	t.Logf("the coordinator failed %v after the server stopped", took)
}
