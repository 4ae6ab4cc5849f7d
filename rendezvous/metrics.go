package rendezvous

import (
	"context"
	"fmt"
)

// MaxMetricPoints bounds the points of one PushMetrics call.
const MaxMetricPoints = 8192

// MetricPoint is one value of a series that a rank sends with PushMetrics.
type MetricPoint struct {
	Step  int64
	Time  int64 // Unix nanoseconds
	Name  string
	Value float64
	// Runtime marks gorovod's own series ("hvd/..."); others are the
	// training code's scalars.
	Runtime bool
}

// metricsReq is PushMetrics' request.
type metricsReq struct {
	Rank   int
	Points []MetricPoint
}

// PushMetrics sends points of rank's series to the server's OnMetrics, in
// one attempt bounded by ctx and the call timeout, never retried (the
// caller counts what fails as dropped). A server without OnMetrics answers
// ErrNoMetrics. At most MaxMetricPoints points, names at most MaxKeyLen
// bytes.
func (c *Client) PushMetrics(ctx context.Context, rank int, points []MetricPoint) error {
	req := &metricsReq{Rank: rank, Points: points}
	if err := req.check(); err != nil {
		return err
	}
	_, err := c.call(ctx, "PushMetrics", req, c.opts.callTimeout)
	return err
}

// check validates a batch of metrics.
func (r *metricsReq) check() error {
	if r.Rank < 0 {
		return fmt.Errorf("%w: metrics of rank %d", ErrBadRequest, r.Rank)
	}
	if len(r.Points) > MaxMetricPoints {
		return fmt.Errorf("%w: %d metric points in one call, at most %d", ErrBadRequest, len(r.Points), MaxMetricPoints)
	}
	for _, p := range r.Points {
		if p.Name == "" || len(p.Name) > MaxKeyLen {
			return fmt.Errorf("%w: metric name of %d bytes, want 1 to %d", ErrBadRequest, len(p.Name), MaxKeyLen)
		}
	}
	return nil
}

// PushMetrics hands a rank's batch of points to OnMetrics.
func (v *service) PushMetrics(r *metricsReq) error {
	if err := v.s.enter(); err != nil {
		return err
	}
	defer v.s.handlers.Leave()
	if v.s.cfg.OnMetrics == nil {
		return ErrNoMetrics
	}
	if err := r.check(); err != nil {
		return err
	}
	v.s.cfg.OnMetrics(r.Rank, r.Points)
	return nil
}
