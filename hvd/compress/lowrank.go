package compress

// The products of PowerSGD multiply the gradient, a matrix M of rows×cols
// values stored by rows, with thin matrices of r columns (r is small:
// the rank of the approximation). A general matrix product (gonum's
// Dgemm) does them at about a tenth of the speed that one pass over M
// with r running sums allows, so they are written out here; each reads M
// once, in storage order.

// mulRows writes M·X into out (rows×r): X is cols×r, both stored by rows.
func mulRows(out, m, x []float64, rows, cols, r int) {
	if r == 4 {
		mulRows4(out, m, x, rows, cols)
		return
	}
	for i := range rows {
		row := m[i*cols : (i+1)*cols]
		o := out[i*r : (i+1)*r]
		clear(o)
		for j, v := range row {
			xj := x[j*r : (j+1)*r]
			for k := range o {
				o[k] += v * xj[k]
			}
		}
	}
}

// mulRows4 is mulRows for r = 4, with the four sums in registers.
func mulRows4(out, m, x []float64, rows, cols int) {
	x = x[:cols*4]
	for i := range rows {
		row := m[i*cols : (i+1)*cols]
		var s0, s1, s2, s3 float64
		for j, v := range row {
			xj := x[j*4 : j*4+4 : j*4+4]
			s0 += v * xj[0]
			s1 += v * xj[1]
			s2 += v * xj[2]
			s3 += v * xj[3]
		}
		o := out[i*4 : i*4+4 : i*4+4]
		o[0], o[1], o[2], o[3] = s0, s1, s2, s3
	}
}

// mulCols writes Mᵀ·Y into out (cols×r): Y is rows×r, both stored by
// rows.
func mulCols(out, m, y []float64, rows, cols, r int) {
	out = out[:cols*r]
	clear(out)
	if r == 4 {
		for i := range rows {
			row := m[i*cols : (i+1)*cols]
			yi := y[i*4 : i*4+4 : i*4+4]
			y0, y1, y2, y3 := yi[0], yi[1], yi[2], yi[3]
			for j, v := range row {
				o := out[j*4 : j*4+4 : j*4+4]
				o[0] += v * y0
				o[1] += v * y1
				o[2] += v * y2
				o[3] += v * y3
			}
		}
		return
	}
	for i := range rows {
		row := m[i*cols : (i+1)*cols]
		yi := y[i*r : (i+1)*r]
		for j, v := range row {
			o := out[j*r : (j+1)*r]
			for k, w := range yi {
				o[k] += v * w
			}
		}
	}
}

// mulOuter writes X·Yᵀ into dst (rows×cols, stored by rows): X is rows×r
// and Y cols×r. With from set it writes from − X·Yᵀ instead (from is
// rows×cols too, and may be dst).
func mulOuter(dst, from, x, y []float64, rows, cols, r int) {
	y = y[:cols*r]
	for i := range rows {
		d := dst[i*cols : (i+1)*cols]
		var f []float64
		if from != nil {
			f = from[i*cols : (i+1)*cols]
		}
		if r == 4 {
			xi := x[i*4 : i*4+4 : i*4+4]
			x0, x1, x2, x3 := xi[0], xi[1], xi[2], xi[3]
			for j := range d {
				yj := y[j*4 : j*4+4 : j*4+4]
				s := x0*yj[0] + x1*yj[1] + x2*yj[2] + x3*yj[3]
				if f != nil {
					s = f[j] - s
				}
				d[j] = s
			}
			continue
		}
		xi := x[i*r : (i+1)*r]
		for j := range d {
			yj := y[j*r : (j+1)*r]
			var s float64
			for k, w := range xi {
				s += w * yj[k]
			}
			if f != nil {
				s = f[j] - s
			}
			d[j] = s
		}
	}
}
