package frame

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/collective"
)

func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range []Header{
		{},
		{Seq: 1, Step: 2, Len: 3},
		{Seq: math.MaxUint64, Step: math.MaxUint32, Len: math.MaxInt},
	} {
		var b [HeaderSize]byte
		Put(&b, h)
		got, err := Decode(b[:])
		if err != nil || got != h {
			t.Errorf("decode(put(%+v)) = %+v, %v", h, got, err)
		}
	}
}

func TestHeaderBytes(t *testing.T) {
	var b [HeaderSize]byte
	Put(&b, Header{Seq: 0x0102030405060708, Step: 0x0a0b0c0d, Len: 0x10})
	want := []byte{'G', 'V', 1, 0, 0x0d, 0x0c, 0x0b, 0x0a,
		8, 7, 6, 5, 4, 3, 2, 1, 0x10, 0, 0, 0, 0, 0, 0, 0}
	if !bytes.Equal(b[:], want) {
		t.Errorf("header bytes\n got % x\nwant % x", b, want)
	}
}

func TestDecodeHeaderRejects(t *testing.T) {
	good := func() []byte {
		var b [HeaderSize]byte
		Put(&b, Header{Seq: 1, Step: 1, Len: 8})
		return b[:]
	}
	cases := []struct {
		name string
		edit func([]byte) []byte
		want string
	}{
		{"short", func(b []byte) []byte { return b[:HeaderSize-1] }, "23 bytes"},
		{"long", func(b []byte) []byte { return append(b, 0) }, "25 bytes"},
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, "magic"},
		{"version", func(b []byte) []byte { b[2] = 2; return b }, "version 2"},
		{"flags", func(b []byte) []byte { b[3] = 2; return b }, "flags"},
		{"length", func(b []byte) []byte { b[23] = 0x80; return b }, "exceeds"},
	}
	for _, c := range cases {
		_, err := Decode(c.edit(good()))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}

// TestRemoteFlag checks that a Remote frame survives Put and Decode, that
// CheckAny reports it and Check, the check of links that carry none,
// rejects it.
func TestRemoteFlag(t *testing.T) {
	var b [HeaderSize]byte
	Put(&b, Header{Seq: 7, Step: 3, Len: 4096, Remote: true})
	h, err := Decode(b[:])
	if err != nil || !h.Remote || h.Len != 4096 {
		t.Fatalf("Decode = %+v, %v; want a Remote frame of 4096 bytes", h, err)
	}
	tag := collective.Tag{Seq: 7, Step: 3}
	if remote, err := CheckAny(b[:], tag, 4096); err != nil || !remote {
		t.Errorf("CheckAny = %v, %v; want true, nil", remote, err)
	}
	if err := Check(b[:], tag, 4096); err == nil || !strings.Contains(err.Error(), "remote frame") {
		t.Errorf("Check = %v, want an error about the remote frame", err)
	}
	Put(&b, Header{Seq: 7, Step: 3, Len: 4096})
	if remote, err := CheckAny(b[:], tag, 4096); err != nil || remote {
		t.Errorf("CheckAny of a plain frame = %v, %v; want false, nil", remote, err)
	}
}

// FuzzDecodeHeader checks that Decode never panics and that whatever
// it accepts encodes back to the same bytes.
func FuzzDecodeHeader(f *testing.F) {
	var b [HeaderSize]byte
	Put(&b, Header{Seq: 7, Step: 3, Len: 4096})
	f.Add(b[:])
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Add(make([]byte, HeaderSize))
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := Decode(in)
		if err != nil {
			return
		}
		var out [HeaderSize]byte
		Put(&out, h)
		if !bytes.Equal(out[:], in) {
			t.Fatalf("decode accepted % x as %+v, which encodes to % x", in, h, out)
		}
	})
}
