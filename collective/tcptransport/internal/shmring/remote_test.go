package shmring

import (
	"bytes"
	"errors"
	"os/exec"
	"testing"
	"unsafe"
)

// await runs AwaitTaken of message id on w in a goroutine and returns
// where its answer arrives.
func await(w *Ring, id uint64, stop func() error) <-chan error {
	done := make(chan error, 1)
	go func() {
		how, err := w.AwaitTaken(id, Poll{}, stop)
		switch {
		case err != nil:
		case how == Refused:
			err = ErrRefused
		}
		done <- err
	}()
	return done
}

// TestRemoteTaken posts a message and reads it from the writer's memory
// into three parts (one empty), as the peer would; the writer learns it
// was taken. A kernel or sandbox that refuses process_vm_readv must
// instead refuse the message and tell the writer so.
func TestRemoteTaken(t *testing.T) {
	w, r := pair(t)
	src := bytes.Repeat([]byte("0123456789abcdefg"), 40000) // 680,000 bytes, not a multiple of a page
	dst := make([]byte, len(src))
	w.Post(1)
	done := await(w, 1, noStop)
	err := r.ReadRemote([][]byte{dst[:5], dst[5:5], dst[5:]}, uintptr(unsafe.Pointer(&src[0])), 1)
	switch err {
	case nil:
		if !bytes.Equal(dst, src) {
			t.Error("the copy differs from the writer's message")
		}
		if err := <-done; err != nil {
			t.Errorf("AwaitTaken = %v, want taken", err)
		}
	case ErrRefused:
		t.Log("process_vm_readv refused here; checking the refusal instead")
		if err := <-done; err != ErrRefused {
			t.Errorf("AwaitTaken = %v, want refused", err)
		}
	default:
		t.Fatalf("ReadRemote = %v", err)
	}
}

// TestRemoteWithdrawn: a writer that gives up waiting withdraws its
// message, and the reader then refuses to use it; a reader's answer to a
// message that is not the one posted is the same.
func TestRemoteWithdrawn(t *testing.T) {
	w, r := pair(t)
	src := make([]byte, 1<<20)
	dst := make([]byte, len(src))
	w.Post(7)
	stopped := errors.New("link failed")
	if err := <-await(w, 7, func() error { return stopped }); err != stopped {
		t.Fatalf("AwaitTaken = %v, want the stop's error", err)
	}
	if err := r.ReadRemote([][]byte{dst}, uintptr(unsafe.Pointer(&src[0])), 7); err != ErrWithdrawn {
		t.Errorf("ReadRemote of a withdrawn message = %v, want ErrWithdrawn", err)
	}
	w.Post(8)
	w.Withdraw(8)
	if err := r.Refuse(8); err != ErrWithdrawn {
		t.Errorf("Refuse of a withdrawn message = %v, want ErrWithdrawn", err)
	}
	w.Post(9)
	if err := r.ReadRemote([][]byte{dst}, uintptr(unsafe.Pointer(&src[0])), 10); err != ErrWithdrawn {
		t.Errorf("ReadRemote of message 10 while 9 is posted = %v, want ErrWithdrawn", err)
	}
}

// TestRemoteRefused: a reader without a pidfd of the writer (or without
// permission) refuses, and the writer learns it.
func TestRemoteRefused(t *testing.T) {
	w, r := pair(t)
	src, dst := make([]byte, 4096), make([]byte, 4096)
	pidfd := r.pidfd
	r.pidfd = -1
	defer func() { r.pidfd = pidfd }()
	w.Post(3)
	done := await(w, 3, noStop)
	if err := r.ReadRemote([][]byte{dst}, uintptr(unsafe.Pointer(&src[0])), 3); err != ErrRefused {
		t.Errorf("ReadRemote without a pidfd = %v, want ErrRefused", err)
	}
	if err := <-done; err != ErrRefused {
		t.Errorf("AwaitTaken = %v, want refused", err)
	}
}

// TestRemoteWriterGone: reading the memory of a writer that has exited
// and been reaped reports ErrGone, not a refusal (which would have the
// reader wait for the payload through the ring).
func TestRemoteWriterGone(t *testing.T) {
	w, r := pair(t)
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid, pidfd := r.pid, r.pidfd
	r.openWriter(cmd.Process.Pid)
	defer func() { r.closeWriter(); r.pid, r.pidfd = pid, pidfd }()
	cmd.Process.Kill()
	cmd.Wait()
	dst := make([]byte, 4096)
	w.Post(5)
	if err := r.ReadRemote([][]byte{dst}, 0x10000, 5); err != ErrGone {
		t.Errorf("ReadRemote from a reaped writer = %v, want ErrGone", err)
	}
	w.Withdraw(5)
}
