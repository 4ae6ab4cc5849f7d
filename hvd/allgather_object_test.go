package hvd_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
)

type rankInfo struct {
	Rank  int
	Host  string
	Steps []int // rank r ran r steps: 0, 1, ..., r-1 (rank 0: none)
	Extra map[string]float64
}

func infoOf(r int) rankInfo {
	v := rankInfo{Rank: r, Host: fmt.Sprintf("host-%d", r/2), Extra: map[string]float64{"loss": float64(r) / 4}}
	for s := range r {
		v.Steps = append(v.Steps, s)
	}
	return v
}

// TestAllgatherObjectClosedForm: every rank gets every rank's value, in
// rank order, of a struct, a pointer and an interface type; rank 0's empty
// slice comes back nil, the same on every rank.
func TestAllgatherObjectClosedForm(t *testing.T) {
	onJobs(t, func(n, r int, rt *hvd.Runtime) error {
		ctx := context.Background()
		got, err := hvd.AllgatherObject(ctx, rt, infoOf(r))
		if err != nil {
			return err
		}
		want := make([]rankInfo, n)
		for q := range want {
			want[q] = infoOf(q)
		}
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("got %+v, want %+v", got, want)
		}
		mine := infoOf(r)
		ptrs, err := hvd.AllgatherObject(ctx, rt, &mine)
		if err != nil {
			return err
		}
		for q, p := range ptrs {
			if p == &mine || !reflect.DeepEqual(*p, want[q]) {
				return fmt.Errorf("pointer %d = %+v (this rank's own: %v), want %+v", q, *p, p == &mine, want[q])
			}
		}
		var v any = r * r
		if r%2 == 1 {
			v = fmt.Sprint(r)
		}
		anys, err := hvd.AllgatherObject(ctx, rt, v)
		if err != nil {
			return err
		}
		for q, a := range anys {
			var w any = q * q
			if q%2 == 1 {
				w = fmt.Sprint(q)
			}
			if a != w {
				return fmt.Errorf("interface %d = %#v, want %#v", q, a, w)
			}
		}
		return nil
	})
}

// TestAllgatherObjectErrors: a value that gob cannot encode on one rank,
// or one encoding to more than the bound, fails the call on every rank
// with ErrInvalidArgument and an error naming that rank; the next call
// works.
func TestAllgatherObjectErrors(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("np%d", n), func(t *testing.T) {
			rts := hvdtest.Start(t, n)
			defer hvd.SetMaxObjectBytes(256)()
			each(t, rts, func(r int, rt *hvd.Runtime) error {
				ctx := context.Background()
				var v any = r // gob skips func fields of structs, but not a func itself
				if r == n-1 {
					v = func() {}
				}
				_, err := hvd.AllgatherObject(ctx, rt, v)
				if !errors.Is(err, hvd.ErrInvalidArgument) {
					return fmt.Errorf("a func: %v, want ErrInvalidArgument", err)
				}
				if r != n-1 && !strings.Contains(err.Error(), fmt.Sprintf("rank %d could not encode", n-1)) {
					return fmt.Errorf("the error does not name rank %d: %v", n-1, err)
				}
				if _, err := hvd.AllgatherObject[*rankInfo](ctx, rt, nil); !errors.Is(err, hvd.ErrInvalidArgument) {
					return fmt.Errorf("a nil pointer: %v, want ErrInvalidArgument", err)
				}
				s := strings.Repeat("x", 100)
				if r == 0 {
					s = strings.Repeat("x", 300)
				}
				if _, err := hvd.AllgatherObject(ctx, rt, s); !errors.Is(err, hvd.ErrInvalidArgument) || !strings.Contains(err.Error(), "rank 0's string encodes to more than MaxObjectBytes (256 bytes)") {
					return fmt.Errorf("a 300-byte string under a 256-byte bound: %v", err)
				}
				got, err := hvd.AllgatherObject(ctx, rt, strings.Repeat("x", 200))
				if err != nil {
					return err
				}
				if len(got) != n || got[n-1] != strings.Repeat("x", 200) {
					return fmt.Errorf("after the failures: %d values, last %q", len(got), got[n-1])
				}
				return nil
			})
		})
	}
}
