package hvd

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
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

// MaxObjectBytes is the most bytes one rank's value may take encoded in an
// AllgatherObject: every rank receives every rank's encoding, so the
// bound keeps a job of many ranks from filling each rank's memory with
// one call. A larger value fails the call on every rank with an error
// that matches ErrInvalidArgument.
const MaxObjectBytes = 64 << 20

// maxObjectBytes is MaxObjectBytes, but for tests.
var maxObjectBytes = MaxObjectBytes

// The lengths a rank sends in place of its encoding's when it has none.
const (
	objectUnencodable = -1
	objectTooLarge    = -2
)

// AllgatherObject returns every rank's v, in rank order, on every rank of
// rt (nil: the default runtime). v is gob-encoded as BroadcastObject
// encodes it (T must be gob-encodable: exported fields, no funcs or
// channels, no nil pointer at the top), every encoding is gathered, and
// every element of the result, this rank's included, is decoded from its
// encoding into a zero T, so that every rank gets equal results (gob's
// rules apply: an empty slice or map comes back nil; an interface T
// carries concrete types that gob.Register knows). A nil pointer or
// interface cannot be encoded. An encoding larger
// than MaxObjectBytes, or a value that cannot be encoded, fails the call
// on every rank with an error naming the rank and matching
// ErrInvalidArgument.
// Calls must not overlap: they use the fixed tensor names
// "object/allgather/len" and "object/allgather/data".
func AllgatherObject[T any](ctx context.Context, rt *Runtime, v T) ([]T, error) {
	rt, err := orDefault(rt)
	if err != nil {
		return nil, err
	}
	typ := reflect.TypeFor[T]()
	var buf bytes.Buffer
	var encErr error
	if rv := reflect.ValueOf(&v).Elem(); (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface) && rv.IsNil() {
		encErr = errors.New("a nil value at the top") // gob would send a nil pointer as a pointer to a zero value
	} else {
		encErr = gob.NewEncoder(&buf).Encode(&v) // through a pointer, so that an interface T travels as one
	}
	n := int64(buf.Len())
	switch {
	case encErr != nil:
		n = objectUnencodable
	case n > int64(maxObjectBytes):
		n = objectTooLarge
	}
	lens, err := AllgatherSlice(ctx, rt, "object/allgather/len", []int64{n})
	if err != nil {
		return nil, err
	}
	if len(lens) != rt.Size() {
		return nil, fmt.Errorf("hvd: AllgatherObject: %d lengths from %d ranks", len(lens), rt.Size())
	}
	if encErr != nil {
		return nil, invalidArgument(fmt.Errorf("hvd: AllgatherObject: encoding %v: %w", typ, encErr))
	}
	for r, l := range lens {
		switch {
		case l == objectUnencodable:
			return nil, invalidArgument(fmt.Errorf("hvd: AllgatherObject: rank %d could not encode its %v", r, typ))
		case l == objectTooLarge:
			return nil, invalidArgument(fmt.Errorf("hvd: AllgatherObject: rank %d's %v encodes to more than MaxObjectBytes (%d bytes)", r, typ, maxObjectBytes))
		case l < 0:
			return nil, fmt.Errorf("hvd: AllgatherObject: rank %d sent length %d", r, l)
		}
	}
	data, err := AllgatherSlice(ctx, rt, "object/allgather/data", buf.Bytes())
	if err != nil {
		return nil, err
	}
	out := make([]T, len(lens))
	off := int64(0)
	for r, l := range lens {
		if off+l > int64(len(data)) {
			return nil, fmt.Errorf("hvd: AllgatherObject: %d bytes gathered, rank %d's encoding ends at %d", len(data), r, off+l)
		}
		if err := gob.NewDecoder(bytes.NewReader(data[off : off+l])).Decode(&out[r]); err != nil {
			return nil, fmt.Errorf("hvd: AllgatherObject: decoding rank %d's %v: %w", r, typ, err)
		}
		off += l
	}
	return out, nil
}
