package main

import (
	"fmt"
	"time"
)

// compute stands for a step's forward and backward pass: forward once,
// then backward(k) before the k-th gradient (of n, last layer first) is
// reported.
type compute interface {
	forward()
	backward(k, n int)
	String() string
}

// sleepCompute spends a fixed time per step: a third in the forward pass,
// the rest spread evenly over the tensors of the backward pass. It sleeps
// until deadlines measured from the step's start, so the time spent
// reporting gradients does not add up.
type sleepCompute struct {
	step  time.Duration
	start time.Time
}

func (c *sleepCompute) forward() {
	c.start = time.Now()
	time.Sleep(c.step / 3)
}

func (c *sleepCompute) backward(k, n int) {
	back := c.step - c.step/3
	time.Sleep(time.Until(c.start.Add(c.step/3 + back*time.Duration(k+1)/time.Duration(n))))
}

func (c *sleepCompute) String() string {
	return fmt.Sprintf("simulated by sleeping %v per step (1/3 forward, 2/3 backward)", c.step)
}

// gemmCompute does real work: dense n×n matrix products, half as many in
// the forward pass as there are tensors, then one per tensor backward.
type gemmCompute struct {
	n       int
	a, b, c []float64
	tensors int
}

func newGemmCompute(n, tensors int) *gemmCompute {
	g := &gemmCompute{n: n, a: make([]float64, n*n), b: make([]float64, n*n), c: make([]float64, n*n), tensors: tensors}
	for i := range g.a {
		g.a[i], g.b[i] = float64(i%7)/7, float64(i%5)/5
	}
	return g
}

func (g *gemmCompute) forward() {
	for range g.tensors / 2 {
		dgemm(g.n, g.a, g.b, g.c)
	}
}

func (g *gemmCompute) backward(int, int) { dgemm(g.n, g.a, g.b, g.c) }

func (g *gemmCompute) String() string {
	return fmt.Sprintf("real: %d %d×%d float64 matrix products per step (%s)", g.tensors+g.tensors/2, g.n, g.n, blasName)
}
