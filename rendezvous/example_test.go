package rendezvous_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/gorovod/gorovod/rendezvous"
)

// A launcher runs the server; two ranks register their data-plane
// addresses and read back the same peer table.
func Example() {
	secret := make([]byte, 32)
	rand.Read(secret)
	srv, err := rendezvous.NewServer(rendezvous.ServerConfig{
		Addr: "127.0.0.1:0", Secret: secret, Size: 2, Hosts: []string{"node-a", "node-b"},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tables := make([][]rendezvous.Peer, 2)
	var wg sync.WaitGroup
	for rank, host := range []string{"node-a", "node-b"} {
		wg.Add(1)
		go func() { // one rank
			defer wg.Done()
			c, err := rendezvous.Dial(ctx, srv.Addr(), secret)
			if err != nil {
				log.Fatal(err)
			}
			defer c.Close()
			if err := c.Register(ctx, rank, host, fmt.Sprintf("10.0.0.%d:7000", rank+1)); err != nil {
				log.Fatal(err)
			}
			if tables[rank], err = c.PeerTable(ctx); err != nil {
				log.Fatal(err)
			}
		}()
	}
	wg.Wait()
	for _, p := range tables[1] {
		fmt.Printf("rank %d on %s at %s\n", p.Rank, p.Host, p.Addr)
	}
	// Output:
	// rank 0 on node-a at 10.0.0.1:7000
	// rank 1 on node-b at 10.0.0.2:7000
}
