package tcptransport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// TestJunkConnectionsAreSummarised knocks on a forming rank 0 with 200 junk
// connections from this host before rank 1 shows up: each is turned away,
// the log gets a handful of Warn lines at most rather than one per
// connection, one of them counts the rejections after the first, and the
// mesh still forms.
func TestJunkConnectionsAreSummarised(t *testing.T) {
	const junk = 200
	var logs logBuffer
	lns, addrs := listenN(t, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cfg := Config{Size: 2, Addrs: addrs, Secret: secretOf(1), Logger: logs.logger()}
	r0 := start(t, ctx, lns[0], cfg)
	knock(t, addrs[0], junk)
	cfg.Rank = 1
	r1 := start(t, ctx, lns[1], cfg)
	if _, err := r0.wait(t); err != nil {
		t.Fatalf("rank 0: %v", err)
	}
	if _, err := r1.wait(t); err != nil {
		t.Fatalf("rank 1: %v", err)
	}
	if warns := logs.lines("level=WARN"); len(warns) > 5 {
		t.Errorf("%d junk connections made %d Warn lines, want at most 5", junk, len(warns))
	}
	if len(logs.lines("level=WARN", "rejected more connections", "host=127.0.0.1", fmt.Sprintf("count=%d ", junk-1))) != 1 {
		t.Errorf("no Warn line counting the %d rejections after the first; Warn lines:\n%s", junk-1, logs.lines("level=WARN"))
	}
}

// knock opens n connections to addr, 20 at a time, each sending bytes
// that are no handshake and waiting until the other side hangs up (with a
// reset, since it leaves bytes unread).
func knock(t *testing.T, addr string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	slots := make(chan struct{}, 20)
	for range n {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			c.Write([]byte("GET / HTTP/1.1\r\nHost: gorovod\r\nUser-Agent: port-scanner/1.0\r\nAccept: */*\r\n\r\n"))
			if err := untilClosed(c); errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("junk connection not closed: %v", err) // a reset is a close too
			}
		})
	}
	wg.Wait()
}
