//go:build cuda

package cuda

import (
	"fmt"
	"runtime"
	"sync"

	"gorgonia.org/cu"
)

// DeviceCount returns the number of GPUs visible to this process (the
// driver applies CUDA_VISIBLE_DEVICES).
func DeviceCount() (int, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return 0, driverErr("cuDeviceGetCount", err)
	}
	return n, nil
}

// Context is one GPU: a reference to its primary CUDA context and the loaded
// kernel module. Its methods may be called from any goroutine. Close it
// after freeing what it allocated.
type Context struct {
	ordinal int
	name    string
	dev     cu.Device
	ctx     cu.CUContext
	mod     *module

	mu     sync.RWMutex // held for reading by every call, for writing by Close
	closed bool
}

// Open retains the primary context of GPU ordinal (0-based, among the
// visible devices) and loads the kernels into it; the driver compiles their
// PTX for the device, which can take a moment on first use. An ordinal out
// of range gives an error wrapping ErrNoDevice.
func Open(ordinal int) (*Context, error) {
	n, err := DeviceCount()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("%w: ordinal %d, %d visible", ErrNoDevice, ordinal, n)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, driverErr("cuDeviceGet", err)
	}
	name, err := dev.Name()
	if err != nil {
		return nil, driverErr("cuDeviceGetName", err)
	}
	pctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		return nil, driverErr("cuDevicePrimaryCtxRetain", err)
	}
	c := &Context{ordinal: ordinal, name: name, dev: dev, ctx: pctx}
	if err := cu.SetCurrentContext(pctx); err != nil {
		_ = dev.ReleasePrimaryCtx()
		return nil, driverErr("cuCtxSetCurrent", err)
	}
	if c.mod, err = loadModule(dev); err != nil {
		_ = dev.ReleasePrimaryCtx()
		return nil, err
	}
	return c, nil
}

// Ordinal returns the device ordinal given to Open.
func (c *Context) Ordinal() int { return c.ordinal }

// Name returns the device's name as the driver reports it.
func (c *Context) Name() string { return c.name }

// Close waits for the work queued on the device, unloads the kernels and
// releases this Context's reference to the primary context; the last
// reference in the process destroys it, and with it any memory, streams and
// events still allocated in it. Close is idempotent; every other method
// returns an error wrapping ErrClosed afterwards.
func (c *Context) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var first error
	keep := func(call string, err error) {
		if err != nil && first == nil {
			first = driverErr(call, err)
		}
	}
	if err := cu.SetCurrentContext(c.ctx); err != nil {
		keep("cuCtxSetCurrent", err)
	} else {
		keep("cuCtxSynchronize", cu.Synchronize())
		keep("cuModuleUnload", c.mod.unload())
		keep("cuCtxSetCurrent", cu.SetCurrentContext(cu.CUContext{}))
	}
	keep("cuDevicePrimaryCtxRelease", c.dev.ReleasePrimaryCtx())
	return first
}

// Synchronize waits until all work queued on the device by this process
// (on every stream, of every Context sharing the GPU) is done.
func (c *Context) Synchronize() error {
	return c.do(func() error {
		if err := cu.Synchronize(); err != nil {
			return driverErr("cuCtxSynchronize", err)
		}
		return nil
	})
}

// do runs f with c's context current on a locked OS thread. It fails with
// ErrClosed once c is closed.
func (c *Context) do(f func() error) error {
	if c == nil {
		return fmt.Errorf("%w: nil context", ErrArgument)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return fmt.Errorf("%w: context of device %d", ErrClosed, c.ordinal)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(c.ctx); err != nil {
		return driverErr("cuCtxSetCurrent", err)
	}
	return f()
}

// driverErr wraps the error of a failed driver call.
func driverErr(call string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrDriver, call, err)
}
