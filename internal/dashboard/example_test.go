package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gorovod/gorovod/internal/dashboard"
	"github.com/gorovod/gorovod/internal/metrics"
)

// static is a Source that never changes.
type static struct{ snap metrics.Snapshot }

func (s static) Snapshot() metrics.Snapshot { return s.snap }
func (s static) Subscribe() (<-chan metrics.Update, func()) {
	ch := make(chan metrics.Update)
	return ch, func() { close(ch) }
}

// gorun's wiring: serve the Store, print the address, and after the job
// ended let the page linger before stopping.
func ExampleServe() {
	src := static{metrics.Snapshot{Job: "train np=2", Ended: true}}
	ctx := context.Background()
	s, err := dashboard.Serve(ctx, dashboard.Config{Addr: "127.0.0.1:0", Source: src, Linger: 10 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	// gorun prints s.URL(); it carries ?token= when the address is not loopback.
	resp, err := http.Get(s.URL() + "metrics")
	if err == nil {
		resp.Body.Close()
		fmt.Println(resp.Status, resp.Header.Get("Content-Type"))
	}
	fmt.Println(s.Shutdown(ctx))
	// Output:
	// 200 OK text/plain; version=0.0.4; charset=utf-8
	// <nil>
}
