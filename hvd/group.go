package hvd

import "context"

// broadcastAll broadcasts every buffer in place from root, all in flight at
// once, and waits for all of them (even after a failure, so that no buffer
// is still being written when it returns).
func broadcastAll(ctx context.Context, rt *Runtime, ts []*Tensor, root int) error {
	hs := make([]*Handle, len(ts))
	for i, t := range ts {
		hs[i] = rt.BroadcastAsync(t, root)
	}
	return waitAll(ctx, hs)
}

// waitAll waits for every handle and returns the first error.
func waitAll(ctx context.Context, hs []*Handle) error {
	var first error
	for _, h := range hs {
		if h == nil {
			continue
		}
		if err := h.Wait(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// orDefault returns rt, or the default runtime when rt is nil: the one rule
// of every helper that takes a *Runtime. Before Init (or after Shutdown)
// that is ErrNotInitialized, never a nil dereference.
func orDefault(rt *Runtime) (*Runtime, error) {
	if rt != nil {
		return rt, nil
	}
	if rt = Default(); rt == nil {
		return nil, ErrNotInitialized
	}
	return rt, nil
}
