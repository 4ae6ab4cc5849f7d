package engine

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/kernels"
)

var sampleRequests = []Request{
	{Name: "grad/w1", Kind: KindAllreduce, DType: kernels.F32, Shape: []int{3, 4}, ReduceOp: kernels.Average},
	{Name: "w", Kind: KindBroadcast, DType: kernels.I64, Shape: []int{2}, Root: 3},
	{Name: "rows", Kind: KindAllgather, DType: kernels.F64, Shape: []int{0, 2}},
	{Name: "a2a", Kind: KindAlltoall, DType: kernels.U8, Shape: []int{6}, Splits: []int{1, 2, 3}},
	{Name: "a2a-empty", Kind: KindAlltoall, DType: kernels.U8, Shape: []int{0}, Splits: []int{}},
	{Name: "rs", Kind: KindReducescatter, DType: kernels.BF16, Shape: []int{7}, ReduceOp: kernels.Max, Prescale: 0.5, Postscale: -2},
	{Name: "g/0", Kind: KindAllreduce, DType: kernels.F16, Shape: []int{}, ReduceOp: kernels.Sum, Group: 1<<63 + 5, GroupSize: 3},
	{Name: "\x00barrier", Kind: KindBarrier},
	{Name: "bad", Kind: KindBroadcast, DType: kernels.F32, Shape: []int{-1}, Root: -7},
	{Name: strings.Repeat("ü", 300), Kind: KindAllreduce, DType: kernels.I32, Shape: []int{1 << 40}, ReduceOp: kernels.Prod},
}

func TestRequestRoundTrip(t *testing.T) {
	for _, r := range sampleRequests {
		b, err := r.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var got Request
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("%q: %v", r.Name, err)
		}
		if !got.Equal(&r) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
		}
	}
}

func TestRequestListRoundTrip(t *testing.T) {
	var in []wireRequest
	for i, r := range sampleRequests {
		in = append(in, wireRequest{Request: r, Age: time.Duration(i) * 1500 * time.Microsecond})
	}
	b, err := appendRequests(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeRequests(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("%d requests, want %d", len(out), len(in))
	}
	for i := range in {
		if !out[i].Equal(&in[i].Request) || out[i].Age != in[i].Age {
			t.Fatalf("request %d: got %+v, want %+v", i, out[i], in[i])
		}
	}
	empty, _ := appendRequests(nil, nil)
	if out, err := decodeRequests(empty); err != nil || len(out) != 0 {
		t.Fatalf("empty list: %v %v", out, err)
	}
}

func TestRequestIsCompact(t *testing.T) {
	r := Request{Name: "layer7/grad", Kind: KindAllreduce, DType: kernels.F32, Shape: []int{4096}, ReduceOp: kernels.Average}
	b, _ := r.MarshalBinary()
	if len(b) > 4+1+len(r.Name)+1+2 {
		t.Fatalf("%d bytes for %+v", len(b), r)
	}
}

func TestRequestDecodeErrors(t *testing.T) {
	good, _ := sampleRequests[0].MarshalBinary()
	for name, b := range map[string][]byte{
		"empty":     nil,
		"truncated": good[:len(good)-1],
		"trailing":  append(append([]byte{}, good...), 0),
		"flags":     {1, 1, 1, 0x80, 0, 0},
		"name len":  {1, 1, 1, 0, 0xff, 0xff, 0x03},
		"dims":      append([]byte{1, 1, 1, 0, 0, 65}, make([]byte, 65)...),
		"varint":    {1, 1, 1, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	} {
		var r Request
		if err := r.UnmarshalBinary(b); !errors.Is(err, collective.ErrProtocol) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	if _, err := decodeRequests([]byte{200}); !errors.Is(err, collective.ErrProtocol) {
		t.Errorf("huge count: got %v", err)
	}
}

func TestRequestCheck(t *testing.T) {
	for _, c := range []struct {
		r    Request
		want string
	}{
		{sampleRequests[0], ""},
		{Request{Name: "x", Kind: 9}, "invalid kind"},
		{Request{Name: "x", Kind: KindAllreduce, DType: 0, ReduceOp: kernels.Sum}, "invalid dtype"},
		{Request{Name: "x", Kind: KindAllreduce, DType: kernels.F32}, "invalid reduce op"},
		{Request{Name: "x", Kind: KindBroadcast, DType: kernels.F32, Root: 4}, "root 4 outside [0, 4)"},
		{Request{Name: "x", Kind: KindAllgather, DType: kernels.F32}, "needs a shape"},
		{Request{Name: "x", Kind: KindAlltoall, DType: kernels.F32, Shape: []int{6}}, "do not split evenly"},
		{Request{Name: "x", Kind: KindAlltoall, DType: kernels.F32, Shape: []int{6}, Splits: []int{1, 2, 3, 1}}, "adding up to 6"},
		{Request{Name: "x", Kind: KindAlltoall, DType: kernels.F32, Shape: []int{8}}, ""},
		{Request{Name: "x", Kind: KindBroadcast, DType: kernels.F32, Shape: []int{-2}}, "negative dimension"},
		{Request{Name: "x", Kind: KindAllreduce, DType: kernels.F32, ReduceOp: kernels.Sum, Group: 3}, "group 3"},
		{Request{Name: "x", Kind: KindBarrier}, ""},
	} {
		err := c.r.check(4)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: got %v, want %q", c.r, err, c.want)
		}
	}
}

// FuzzDecodeRequests: the decoder never panics, and whatever it accepts
// encodes back to bytes that decode to the same requests.
func FuzzDecodeRequests(f *testing.F) {
	var all []wireRequest
	for _, r := range sampleRequests {
		all = append(all, wireRequest{Request: r, Age: time.Millisecond})
		b, _ := r.MarshalBinary()
		f.Add(append([]byte{1, 5}, b...))
	}
	b, _ := appendRequests(nil, all)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		reqs, err := decodeRequests(data)
		if err != nil {
			if !errors.Is(err, collective.ErrProtocol) {
				t.Fatalf("error %v does not wrap collective.ErrProtocol", err)
			}
			return
		}
		again, err := appendRequests(nil, reqs)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeRequests(again)
		if err != nil {
			t.Fatalf("re-encoded list does not decode: %v", err)
		}
		if !sameWire(reqs, back) {
			t.Fatalf("round trip changed the requests:\n%+v\n%+v", reqs, back)
		}
		if a2, _ := appendRequests(nil, back); !bytes.Equal(a2, again) {
			t.Fatal("encoding is not canonical")
		}
	})
}

// sameWire compares lists treating float fields bit for bit (NaN included).
func sameWire(a, b []wireRequest) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if math.Float64bits(x.Prescale) != math.Float64bits(y.Prescale) || math.Float64bits(x.Postscale) != math.Float64bits(y.Postscale) {
			return false
		}
		x.Prescale, x.Postscale, y.Prescale, y.Postscale = 0, 0, 0, 0
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}
