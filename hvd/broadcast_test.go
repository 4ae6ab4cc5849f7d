package hvd_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
)

func TestBroadcastParametersAndOptimizerState(t *testing.T) {
	rts := hvdtest.Start(t, 3)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		ctx := context.Background()
		ps := []*hvd.Param{hvd.NewParam("a", 3), hvd.NewParam("b", 0), hvd.NewParam("c", 1), hvd.NewParam32("d", 2)}
		for _, p := range ps {
			for i := range p.Value {
				p.Value[i] = float64(10*r + i)
			}
			for i := range p.Value32 {
				p.Value32[i] = float32(r) + 0.25
			}
		}
		sgd, _ := hvd.NewSGD(ps, hvd.SGDConfig{LR: float64(r + 1), Momentum: 0.9})
		st := sgd.State()
		st.Steps = int64(100 * r)
		st.Slots["momentum/a"][2] = float64(r) + 0.5
		if err := sgd.SetState(st); err != nil {
			return err
		}
		if err := hvd.BroadcastParameters(ctx, rt, ps, 1); err != nil {
			return err
		}
		if err := hvd.BroadcastOptimizerState(ctx, rt, sgd, 1); err != nil {
			return err
		}
		if got := ps[0].Value; !reflect.DeepEqual(got, []float64{10, 11, 12}) || ps[2].Value[0] != 10 {
			return fmt.Errorf("parameters %v %v, want rank 1's", got, ps[2].Value)
		}
		if got := ps[3].Value32; !reflect.DeepEqual(got, []float32{1.25, 1.25}) {
			return fmt.Errorf("float32 parameter %v, want rank 1's", got)
		}
		got := sgd.State()
		if got.Steps != 100 || got.LR != 2 || got.Slots["momentum/a"][2] != 1.5 {
			return fmt.Errorf("optimizer state %+v, want rank 1's", got)
		}
		return nil
	})
}

type config struct {
	Name    string
	Layers  []int
	Dropout float64
	Labels  map[int]string
	Inner   *struct{ X, Y int }
}

func TestBroadcastObject(t *testing.T) {
	rts := hvdtest.Start(t, 3)
	want := config{Name: "mlp", Layers: []int{784, 128, 10}, Labels: map[int]string{0: "t-shirt"}}
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		v := config{Name: "local", Dropout: 0.5, Inner: &struct{ X, Y int }{1, 2}} // fields root has as zero
		if r == 2 {
			v = want
		}
		if err := hvd.BroadcastObject(context.Background(), rt, &v, 2); err != nil {
			return err
		}
		if !reflect.DeepEqual(v, want) {
			return fmt.Errorf("got %+v, want %+v", v, want)
		}
		return nil
	})
}

func TestBroadcastObjectErrors(t *testing.T) {
	rts := hvdtest.Start(t, 2)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		ctx := context.Background()
		if err := hvd.BroadcastObject(ctx, rt, config{}, 0); err == nil {
			return fmt.Errorf("a non-pointer was accepted")
		}
		// root cannot encode a func; every rank must fail, none may hang
		v := struct{ F func() }{}
		if err := hvd.BroadcastObject(ctx, rt, &v, 0); err == nil {
			return fmt.Errorf("an unencodable value was broadcast")
		}
		n := 7 * (r + 1)
		return hvd.BroadcastObject(ctx, rt, &n, 0) // still usable
	})
}

func TestAverageMetrics(t *testing.T) {
	rts := hvdtest.Start(t, 4)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		ctx := context.Background()
		loss, err := hvd.AverageMetric(ctx, rt, "loss", float64(r))
		if err != nil || loss != 1.5 {
			return fmt.Errorf("loss %v, %v; want 1.5", loss, err)
		}
		m, err := hvd.AverageMetrics(ctx, rt, map[string]float64{"acc": float64(r) / 10, "n": 4})
		if err != nil || !near(m["acc"], 0.15, 1e-15) || m["n"] != 4 {
			return fmt.Errorf("metrics %v, %v", m, err)
		}
		return nil
	})
}
