package hvd

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"reflect"
)

// BroadcastObject copies root's value of *v into every rank's *v, on rt
// (nil: the default runtime). v must be a non-nil pointer to a
// gob-encodable value, of the same type on every rank. Root encodes it; its
// length travels first, then its bytes; the other ranks reset *v to its
// zero value and decode into it (so that no field keeps a value of its own
// that root's zero would not overwrite).
// Calls must not overlap: they use the fixed tensor names "object/len" and
// "object/data".
func BroadcastObject(ctx context.Context, rt *Runtime, v any, root int) error {
	rt, err := orDefault(rt)
	if err != nil {
		return err
	}
	pv := reflect.ValueOf(v)
	if pv.Kind() != reflect.Pointer || pv.IsNil() {
		return invalidArgument(fmt.Errorf("hvd: BroadcastObject needs a non-nil pointer, not %T", v))
	}
	data, err := rootBytes(ctx, rt, v, root)
	if err != nil {
		return err
	}
	if rt.Rank() != root {
		pv.Elem().SetZero()
		if err := gob.NewDecoder(bytes.NewReader(data)).Decode(v); err != nil {
			return fmt.Errorf("hvd: BroadcastObject: decoding root's %T: %w", v, err)
		}
	}
	return nil
}

// rootBytes broadcasts root's encoding of v and returns it on every rank.
// An encoding failure on root is sent as length -1, so that the other
// ranks fail too instead of waiting for bytes that never come.
func rootBytes(ctx context.Context, rt *Runtime, v any, root int) ([]byte, error) {
	var buf bytes.Buffer
	var encErr error
	n := []int64{0}
	if rt.Rank() == root {
		if encErr = gob.NewEncoder(&buf).Encode(v); encErr != nil {
			n[0] = -1
		} else {
			n[0] = int64(buf.Len())
		}
	}
	if err := rt.Broadcast(ctx, NewTensor("object/len", n), root); err != nil {
		return nil, err
	}
	if encErr != nil {
		return nil, fmt.Errorf("hvd: BroadcastObject: encoding %T: %w", v, encErr)
	}
	if n[0] < 0 {
		return nil, fmt.Errorf("hvd: BroadcastObject: rank %d could not encode its %T", root, v)
	}
	data := buf.Bytes()
	if rt.Rank() != root {
		data = make([]byte, n[0])
	}
	if err := rt.Broadcast(ctx, NewTensor("object/data", data), root); err != nil {
		return nil, err
	}
	return data, nil
}
