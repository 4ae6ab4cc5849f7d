package rendezvous

import (
	"context"
	"testing"
)

// BenchmarkPing measures one authenticated round trip (a Ping) over
// loopback, one caller at a time.
func BenchmarkPing(b *testing.B) {
	secret := newSecret(b)
	s := startServer(b, ServerConfig{Secret: secret, Size: 1})
	c := dial(b, s.Addr(), secret)
	ctx := context.Background()
	for b.Loop() {
		if err := c.Ping(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPingParallel measures Ping throughput with concurrent callers
// sharing one client.
func BenchmarkPingParallel(b *testing.B) {
	secret := newSecret(b)
	s := startServer(b, ServerConfig{Secret: secret, Size: 1})
	c := dial(b, s.Addr(), secret)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := c.Ping(context.Background()); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
