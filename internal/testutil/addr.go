package testutil

import (
	"net"
	"testing"
)

// FreeAddr returns a loopback address ("127.0.0.1:port") that nothing
// listened on a moment ago: a port the kernel handed out and took back.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
