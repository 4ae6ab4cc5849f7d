package tcpopt

import (
	"net"
	"testing"
)

// pair returns both ends of a loopback TCP connection.
func pair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

// TestCongestion: Reno, which every Linux has, is set and read back on one
// end only; a name the kernel lacks is refused and changes nothing.
func TestCongestion(t *testing.T) {
	a, b := pair(t)
	before, err := Congestion(b)
	if err != nil || before == "" {
		t.Fatalf("Congestion = %q, %v", before, err)
	}
	if err := SetCongestion(a, "reno"); err != nil {
		t.Fatal(err)
	}
	if got, err := Congestion(a); err != nil || got != "reno" {
		t.Fatalf("after SetCongestion(reno): %q, %v", got, err)
	}
	if got, _ := Congestion(b); got != before {
		t.Fatalf("the other end changed from %q to %q", before, got)
	}
	if err := SetCongestion(a, "no_such_cc"); err == nil {
		t.Fatal("SetCongestion(no_such_cc) succeeded")
	}
	if got, _ := Congestion(a); got != "reno" {
		t.Fatalf("a refused name changed the algorithm to %q", got)
	}
	a.Close()
	if err := SetCongestion(a, "reno"); err == nil {
		t.Fatal("SetCongestion on a closed socket succeeded")
	}
	if _, err := Congestion(a); err == nil {
		t.Fatal("Congestion of a closed socket succeeded")
	}
}
