//go:build cuda

package cuda

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// Stream is a CUDA stream: work enqueued on it runs in order, concurrently
// with other streams. Its methods return once the work is enqueued; use
// Synchronize or an Event to wait. A Stream may be used from several
// goroutines, but Close must not race with its other methods.
type Stream struct {
	c      *Context
	s      cu.Stream
	closed bool
}

// NewStream creates a non-blocking stream (one that does not synchronise
// with the legacy default stream).
func (c *Context) NewStream() (*Stream, error) {
	s := &Stream{c: c}
	err := c.do(func() error {
		var err error
		if s.s, err = cu.MakeStream(cu.NonBlocking); err != nil {
			return driverErr("cuStreamCreate", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Synchronize waits until all work enqueued on s is done.
func (s *Stream) Synchronize() error {
	return s.do("synchronize", func() error {
		if err := s.s.Synchronize(); err != nil {
			return driverErr("cuStreamSynchronize", err)
		}
		return nil
	})
}

// Close destroys s. Work already enqueued still completes. Closing twice
// does nothing.
func (s *Stream) Close() error {
	if s == nil || s.closed {
		return nil
	}
	return s.c.do(func() error {
		if err := s.s.Destroy(); err != nil {
			return driverErr("cuStreamDestroy", err)
		}
		s.closed = true
		return nil
	})
}

// CopyHtoD enqueues a copy of src to device address dst. The copy is only
// asynchronous when src is pinned (Pinned.Bytes); from ordinary Go memory
// the driver stages the data before returning.
func (s *Stream) CopyHtoD(dst uintptr, src []byte) error {
	if err := checkPtr("copy host to device", dst, len(src)); err != nil {
		return err
	}
	return s.do("copy host to device", func() error {
		if len(src) == 0 {
			return nil
		}
		if err := cu.MemcpyHtoDAsync(cu.DevicePtr(dst), unsafe.Pointer(&src[0]), int64(len(src)), s.s); err != nil {
			return driverErr("cuMemcpyHtoDAsync", err)
		}
		return nil
	})
}

// CopyDtoH enqueues a copy of len(dst) bytes from device address src into
// dst. It is only asynchronous when dst is pinned; into ordinary Go memory
// the call returns once the copy is done.
func (s *Stream) CopyDtoH(dst []byte, src uintptr) error {
	if err := checkPtr("copy device to host", src, len(dst)); err != nil {
		return err
	}
	return s.do("copy device to host", func() error {
		if len(dst) == 0 {
			return nil
		}
		if err := cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), cu.DevicePtr(src), int64(len(dst)), s.s); err != nil {
			return driverErr("cuMemcpyDtoHAsync", err)
		}
		return nil
	})
}

// CopyDtoD enqueues a copy of bytes bytes from device address src to dst.
// The ranges must not overlap.
func (s *Stream) CopyDtoD(dst, src uintptr, bytes int) error {
	if err := checkPtr("copy device to device", dst, bytes); err != nil {
		return err
	}
	if err := checkPtr("copy device to device", src, bytes); err != nil {
		return err
	}
	return s.do("copy device to device", func() error {
		if bytes == 0 {
			return nil
		}
		if err := cu.MemcpyDtoDAsync(cu.DevicePtr(dst), cu.DevicePtr(src), int64(bytes), s.s); err != nil {
			return driverErr("cuMemcpyDtoDAsync", err)
		}
		return nil
	})
}

// Memset enqueues the zeroing of bytes bytes at device address dst.
func (s *Stream) Memset(dst uintptr, bytes int) error {
	if err := checkPtr("memset", dst, bytes); err != nil {
		return err
	}
	return s.do("memset", func() error {
		if bytes == 0 {
			return nil
		}
		if err := cu.MemsetD8Async(cu.DevicePtr(dst), 0, int64(bytes), s.s); err != nil {
			return driverErr("cuMemsetD8Async", err)
		}
		return nil
	})
}

// do checks s and runs f under its context (see Context.do).
func (s *Stream) do(what string, f func() error) error {
	if s == nil || s.c == nil {
		return fmt.Errorf("%w: %s: nil stream", ErrArgument, what)
	}
	if s.closed {
		return fmt.Errorf("%w: %s: stream", ErrClosed, what)
	}
	return s.c.do(f)
}

// checkPtr validates a device range of bytes bytes at p.
func checkPtr(what string, p uintptr, bytes int) error {
	switch {
	case bytes < 0:
		return fmt.Errorf("%w: %s: negative length %d", ErrArgument, what, bytes)
	case bytes > 0 && p == 0:
		return fmt.Errorf("%w: %s: null device pointer", ErrArgument, what)
	}
	return nil
}
