package auth

import (
	"errors"
	"net"
	"testing"
	"time"
)

// errInjected is the I/O failure faultyConn injects.
var errInjected = errors.New("injected I/O failure")

// faultyConn fails the n-th call of one of its methods ("Read", "Write" or
// "SetDeadline") with errInjected and passes every other call on.
type faultyConn struct {
	net.Conn
	method string
	n      int
	calls  map[string]int
}

func (f *faultyConn) fault(method string) error {
	f.calls[method]++
	if method == f.method && f.calls[method] == f.n {
		return errInjected
	}
	return nil
}

func (f *faultyConn) Read(p []byte) (int, error) {
	if err := f.fault("Read"); err != nil {
		return 0, err
	}
	return f.Conn.Read(p)
}

func (f *faultyConn) Write(p []byte) (int, error) {
	if err := f.fault("Write"); err != nil {
		return 0, err
	}
	return f.Conn.Write(p)
}

func (f *faultyConn) SetDeadline(t time.Time) error {
	if err := f.fault("SetDeadline"); err != nil {
		return err
	}
	return f.Conn.SetDeadline(t)
}

// handshakeWithFault runs a handshake in which side's n-th call of method
// fails, and returns that side's error (nil when the handshake made fewer
// calls). Each side closes its end when it fails, as a real one does, so
// the other never waits for the deadline.
func handshakeWithFault(side, method string, n int) error {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var client, server Conn = a, b
	faulty := &faultyConn{method: method, n: n, calls: map[string]int{}}
	if side == "client" {
		faulty.Conn, client = a, faulty
	} else {
		faulty.Conn, server = b, faulty
	}
	dl := time.Now().Add(5 * time.Second)
	done := make(chan error, 1)
	go func() {
		_, err := Server(server, secret(4), []byte("server"), dl)
		if err != nil {
			b.Close()
		}
		done <- err
	}()
	_, cerr := Client(client, secret(4), []byte("client"), dl)
	if cerr != nil {
		a.Close()
	}
	serr := <-done
	if side == "client" {
		return cerr
	}
	return serr
}

// TestIOFailuresKeepTheirCause fails every Read, Write and SetDeadline of
// the handshake in turn, on each side: the error must wrap both ErrAuth
// and the I/O error itself.
func TestIOFailuresKeepTheirCause(t *testing.T) {
	for _, side := range []string{"server", "client"} {
		for _, method := range []string{"Read", "Write", "SetDeadline"} {
			n := 1
			for ; n < 100; n++ {
				err := handshakeWithFault(side, method, n)
				if err == nil {
					break // the handshake makes fewer calls
				}
				if !errors.Is(err, ErrAuth) || !errors.Is(err, errInjected) {
					t.Errorf("%s, %s call %d fails: got %v, want an error wrapping ErrAuth and the I/O error", side, method, n, err)
				}
			}
			if n == 1 || n == 100 {
				t.Errorf("%s, %s: %d calls failed", side, method, n-1)
			}
		}
	}
}
