package rendezvous

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestPushMetrics(t *testing.T) {
	secret := newSecret(t)
	var mu sync.Mutex
	var got []MetricPoint
	var ranks []int
	srv := startServer(t, ServerConfig{Secret: secret, Size: 2, OnMetrics: func(rank int, points []MetricPoint) {
		mu.Lock()
		defer mu.Unlock()
		ranks = append(ranks, rank)
		got = append(got, points...)
	}})
	c := dial(t, srv.Addr(), secret)
	pts := []MetricPoint{{Step: 3, Time: 42, Name: "loss", Value: 0.5}, {Step: 3, Name: "hvd/step", Value: 3, Runtime: true}}
	if err := c.PushMetrics(ctxFor(t, 10*time.Second), 1, pts); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(ranks) != 1 || ranks[0] != 1 || len(got) != 2 || got[0] != pts[0] || got[1] != pts[1] {
		t.Errorf("server got rank %v, points %+v", ranks, got)
	}
	mu.Unlock()

	for _, bad := range [][]MetricPoint{{{Name: ""}}, {{Name: strings.Repeat("x", MaxKeyLen+1)}}, make([]MetricPoint, MaxMetricPoints+1)} {
		if err := c.PushMetrics(ctxFor(t, 10*time.Second), 0, bad); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%d points, first name of %d bytes: %v, want ErrBadRequest", len(bad), len(bad[0].Name), err)
		}
	}
	if err := c.PushMetrics(ctxFor(t, 10*time.Second), -1, pts); !errors.Is(err, ErrBadRequest) {
		t.Errorf("rank -1: %v", err)
	}
}

func TestPushMetricsWithoutReceiver(t *testing.T) {
	secret := newSecret(t)
	srv := startServer(t, ServerConfig{Secret: secret, Size: 1})
	c := dial(t, srv.Addr(), secret)
	err := c.PushMetrics(ctxFor(t, 10*time.Second), 0, []MetricPoint{{Name: "loss", Value: 1}})
	if !errors.Is(err, ErrNoMetrics) {
		t.Errorf("got %v, want ErrNoMetrics", err)
	}
}
