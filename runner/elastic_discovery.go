package runner

import (
	"context"
	"time"
)

// discoveryInterval is how often the discovery script runs.
var discoveryInterval = time.Second

// discovery is one run of the discovery script.
type discovery struct {
	hosts []Host
	err   error
}

// discoverer runs the discovery script every discoveryInterval in a
// goroutine of its own ("elastic-discovery") until stopped, and hands each
// run over in turn: ready receives, then take returns it. The next run
// begins once it has been taken.
type discoverer struct {
	ready   chan struct{}
	results chan discovery // holds the run announced on ready
	stop    func()         // ends the loop, its script's run killed, and waits for it
}

func startDiscoverer(ctx context.Context, script string, slotsPerHost int) *discoverer {
	d := &discoverer{ready: make(chan struct{}), results: make(chan discovery, 1)}
	ctx, cancel := context.WithCancel(ctx)
	ended := make(chan struct{})
	d.stop = func() { cancel(); <-ended }
	go func() {
		defer close(ended)
		d.loop(ctx, script, slotsPerHost)
	}()
	return d
}

// loop runs the script every discoveryInterval until ctx ends.
func (d *discoverer) loop(ctx context.Context, script string, slotsPerHost int) {
	t := time.NewTicker(discoveryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hosts, err := DiscoverHosts(ctx, script, slotsPerHost)
		d.results <- discovery{hosts, err} // empty: the last one was taken
		select {
		case d.ready <- struct{}{}:
		case <-ctx.Done():
			return
		}
	}
}

// take returns the run that ready announced.
func (d *discoverer) take() discovery { return <-d.results }
