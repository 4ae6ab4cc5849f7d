package main

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testutil"
)

// TestExchange runs both ranks over loopback with one and with three
// sockets per direction, at sizes that do not divide evenly, and checks
// rank 0's lines.
func TestExchange(t *testing.T) {
	for _, k := range []string{"1", "3"} {
		addr := testutil.FreeAddr(t)
		args := []string{"-addr", addr, "-streams", k, "-congestion", "reno", "-s", "1,1000003", "-b", "0.01", "-w", "0.01", "-timeout", "30s"}
		c0, err := parse(append([]string{"-rank", "0"}, args...))
		if err != nil {
			t.Fatal(err)
		}
		c1, err := parse(append([]string{"-rank", "1"}, args...))
		if err != nil {
			t.Fatal(err)
		}
		var out0, out1 bytes.Buffer
		errc := make(chan error, 1)
		go func() { errc <- run(c1, &out1) }()
		if err := run(c0, &out0); err != nil {
			t.Fatalf("streams %s: rank 0: %v", k, err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("streams %s: rank 1: %v", k, err)
		}
		lines := strings.Split(strings.TrimSpace(out0.String()), "\n")
		if len(lines) != 4 || !strings.HasPrefix(lines[1], "RESULT,tcpx"+k+",2,1,") ||
			!strings.HasPrefix(lines[2], "RESULT,tcpx"+k+",2,1000003,") || !strings.HasSuffix(lines[2], ",ok") || lines[3] != "# done" {
			t.Fatalf("streams %s: rank 0 printed\n%s", k, out0.String())
		}
		if out1.Len() != 0 {
			t.Fatalf("rank 1 printed %q", out1.String())
		}
	}
}

// TestUnknownCongestion: a congestion control the kernel lacks fails the
// run, naming it.
func TestUnknownCongestion(t *testing.T) {
	addr := testutil.FreeAddr(t)
	args := []string{"-addr", addr, "-congestion", "no_such_cc", "-timeout", "30s"}
	c0, _ := parse(append([]string{"-rank", "0"}, args...))
	c1, _ := parse(append([]string{"-rank", "1"}, args...))
	errc := make(chan error, 1)
	go func() { errc <- run(c1, new(bytes.Buffer)) }()
	err0 := run(c0, new(bytes.Buffer))
	err1 := <-errc
	for r, err := range []error{err0, err1} {
		if err == nil || !strings.Contains(err.Error(), "no_such_cc") {
			t.Errorf("rank %d: %v, want an error naming no_such_cc", r, err)
		}
	}
}

// TestRefusesStrangers: a connection that does not greet properly fails
// rank 0's run at once, naming it.
func TestRefusesStrangers(t *testing.T) {
	addr := testutil.FreeAddr(t)
	c0, err := parse([]string{"-rank", "0", "-addr", addr, "-timeout", "30s"})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- run(c0, new(bytes.Buffer)) }()
	var c net.Conn
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if c, err = net.Dial("tcp", addr); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "refused a connection") {
			t.Fatalf("run = %v, want a refusal", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("rank 0 still waits after a bad greeting")
	}
}

func TestParse(t *testing.T) {
	for _, bad := range [][]string{
		{"-addr", "x:1"},
		{"-rank", "2", "-addr", "x:1"},
		{"-rank", "0"},
		{"-rank", "0", "-addr", "x:1", "-streams", "0"},
		{"-rank", "0", "-addr", "x:1", "-streams", "17"},
		{"-rank", "0", "-addr", "x:1", "-s", "0"},
		{"-rank", "0", "-addr", "x:1", "-s", "1,x"},
		{"-rank", "0", "-addr", "x:1", "-timeout", "0s"},
		{"-rank", "0", "-addr", "x:1", "extra"},
	} {
		if _, err := parse(bad); err == nil {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}
