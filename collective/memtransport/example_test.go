package memtransport_test

import (
	"context"
	"fmt"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/memtransport"
)

func ExampleNewNetwork() {
	net := memtransport.NewNetwork(2)
	defer net.Close()
	ctx := context.Background()
	a, b := net.Transport(0), net.Transport(1)
	tag := collective.Tag{Seq: 1, Step: 0}

	// Send returns at once, so one goroutine can play both ranks.
	if err := a.Conn(1).Send(ctx, tag, []byte("hello")); err != nil {
		fmt.Println(err)
	}
	p := make([]byte, 5)
	if err := b.Conn(0).Recv(ctx, tag, p); err != nil {
		fmt.Println(err)
	}
	fmt.Printf("rank %d got %q from %s\n", b.Rank(), p, b.Host(0))
	// Output: rank 1 got "hello" from mem:0
}
