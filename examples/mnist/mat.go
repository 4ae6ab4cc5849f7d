package main

// mat is a row-major matrix: a batch of rows.
type mat struct {
	r, c int
	d    []float64
}

// reshape makes m r×c, reusing its storage when it is large enough; the
// contents are unspecified.
func (m *mat) reshape(r, c int) *mat {
	m.r, m.c = r, c
	if cap(m.d) < r*c {
		m.d = make([]float64, r*c)
	}
	m.d = m.d[:r*c]
	return m
}

// scale multiplies x by s (s == 0 clears it, NaNs included).
func scale(x []float64, s float64) {
	if s == 0 {
		clear(x)
		return
	}
	if s == 1 {
		return
	}
	for i := range x {
		x[i] *= s
	}
}
