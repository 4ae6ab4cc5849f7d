//go:build cuda

package hvd

import (
	"cmp"
	"fmt"
	"os"
	"sync"

	"github.com/gorovod/gorovod/kernels/cuda"
)

// Device returns the GPU this rank pins: LocalRank modulo the GPUs this
// process sees (CUDA_VISIBLE_DEVICES narrows and orders them), or the CPU
// if it sees none. Ranks on one host thus get distinct GPUs while there
// are at least as many GPUs as local ranks.
func (r *Runtime) Device() Device {
	n, err := cuda.DeviceCount()
	if err != nil {
		n = 0
	}
	return Device{GPU: pinGPU(r.LocalRank(), n)}
}

// deviceState is the runtime's GPU state, opened on first use: the CUDA
// context of its device, the stagers (streams and page-locked buffers)
// that idle device operations left, the allocations AllocDevice and
// AllgatherDevice made, and the device operations in flight.
type deviceState struct {
	mu       sync.Mutex
	ctx      *cuda.Context
	openErr  error
	closed   bool
	idle     []*stager
	allocs   map[uintptr]*cuda.Buffer
	inflight map[string]bool
	ops      sync.WaitGroup // device operations' goroutines
	chunk    int            // staging span size in bytes; 0: stageChunk (tests set others)
}

// stageBytes is the most bytes of a device tensor staged at a time.
func (d *deviceState) stageBytes() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return cmp.Or(d.chunk, stageChunk)
}

// gpu returns the rank's CUDA context, opening it on first use.
func (r *Runtime) gpu() (*cuda.Context, error) {
	d := &r.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrShutdown
	}
	if d.ctx != nil || d.openErr != nil {
		return d.ctx, d.openErr
	}
	dev := r.Device()
	if !dev.IsGPU() {
		d.openErr = fmt.Errorf("hvd: rank %d sees no GPU (CUDA_VISIBLE_DEVICES=%q)", r.Rank(), os.Getenv("CUDA_VISIBLE_DEVICES"))
		return nil, d.openErr
	}
	if n, _ := cuda.DeviceCount(); r.LocalSize() > n {
		r.log.Warn("hvd: more ranks on this host than GPUs: ranks share a GPU", "local_size", r.LocalSize(), "gpus", n, "gpu", dev.GPU)
	}
	d.ctx, d.openErr = cuda.Open(dev.GPU)
	if d.openErr != nil {
		d.openErr = fmt.Errorf("hvd: rank %d: opening %v: %w", r.Rank(), dev, d.openErr)
	}
	return d.ctx, d.openErr
}

// closeDevice waits for the device operations in flight (Shutdown has
// failed their engine operations, so they end) and releases the stagers,
// the allocations and the context.
func (r *Runtime) closeDevice() {
	d := &r.dev
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.ops.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.idle {
		s.close(d.ctx)
	}
	d.idle = nil
	for _, b := range d.allocs {
		d.ctx.Free(b)
	}
	d.allocs = nil
	if d.ctx != nil {
		d.ctx.Close()
		d.ctx = nil
	}
}

func (r *Runtime) allocDevice(t *DeviceTensor) error {
	ctx, err := r.gpu()
	if err != nil {
		return err
	}
	b, err := ctx.Alloc(t.Bytes())
	if err != nil {
		return fmt.Errorf("hvd: allocating device tensor %q: %w", t.Name, err)
	}
	t.Ptr = b.Ptr
	if b.Ptr == 0 {
		return nil // zero bytes: nothing to track
	}
	d := &r.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.allocs == nil {
		d.allocs = map[uintptr]*cuda.Buffer{}
	}
	d.allocs[b.Ptr] = b
	return nil
}

func (r *Runtime) freeDevice(t *DeviceTensor) error {
	d := &r.dev
	d.mu.Lock()
	b := d.allocs[t.Ptr]
	delete(d.allocs, t.Ptr)
	ctx := d.ctx
	d.mu.Unlock()
	if b == nil {
		return fmt.Errorf("%w: device tensor %q was not allocated by this runtime (or was freed)", ErrInvalidTensor, t.Name)
	}
	t.Ptr = 0
	return ctx.Free(b)
}

// begin registers a device operation on name: it fails if the runtime is
// shut down or name has a device operation in flight. end undoes it.
func (r *Runtime) begin(op, name string) error {
	d := &r.dev
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case closed || d.closed:
		return fmt.Errorf("hvd: %s of device tensor %q: %w", op, name, ErrShutdown)
	case d.inflight[name]:
		return fmt.Errorf("hvd: %s of device tensor %q: %w", op, name, ErrDuplicateName)
	}
	if d.inflight == nil {
		d.inflight = map[string]bool{}
	}
	d.inflight[name] = true
	d.ops.Add(1)
	return nil
}

func (r *Runtime) end(name string) {
	d := &r.dev
	d.mu.Lock()
	delete(d.inflight, name)
	d.mu.Unlock()
	d.ops.Done()
}

// stager moves spans of a device tensor through page-locked host memory:
// down copies device to host, up host to device, each on its own stream;
// slot i%3 holds span i, and freed[k] marks the end of the last copy up
// out of slot k, so a copy down into it waits for that.
type stager struct {
	size     int // bytes per slot
	down, up *cuda.Stream
	slots    [3]*cuda.Pinned
	freed    [3]*cuda.Event
}

func newStager(ctx *cuda.Context, size int) (s *stager, err error) {
	s = &stager{size: size}
	defer func() {
		if err != nil {
			s.close(ctx)
		}
	}()
	if s.down, err = ctx.NewStream(); err != nil {
		return nil, err
	}
	if s.up, err = ctx.NewStream(); err != nil {
		return nil, err
	}
	for i := range s.slots {
		if s.slots[i], err = ctx.AllocPinned(size); err != nil {
			return nil, err
		}
		if s.freed[i], err = ctx.NewEvent(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *stager) close(ctx *cuda.Context) {
	for i := range s.slots {
		if s.slots[i] != nil {
			ctx.FreePinned(s.slots[i])
		}
		if s.freed[i] != nil {
			s.freed[i].Close()
		}
	}
	for _, st := range []*cuda.Stream{s.down, s.up} {
		if st != nil {
			st.Close()
		}
	}
}

// takeStager returns an idle stager with slots of at least size bytes,
// or makes one.
func (r *Runtime) takeStager(ctx *cuda.Context, size int) (*stager, error) {
	d := &r.dev
	d.mu.Lock()
	if n := len(d.idle); n > 0 {
		s := d.idle[n-1]
		d.idle = d.idle[:n-1]
		d.mu.Unlock()
		if s.size >= size {
			return s, nil
		}
		s.close(ctx)
	} else {
		d.mu.Unlock()
	}
	return newStager(ctx, size)
}

// giveStager returns s, whose streams are idle, for reuse.
func (r *Runtime) giveStager(s *stager) {
	d := &r.dev
	d.mu.Lock()
	d.idle = append(d.idle, s)
	d.mu.Unlock()
}
