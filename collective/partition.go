package collective

// partition splits count elements into parts contiguous pieces whose sizes
// differ by at most one, larger pieces first, and returns the offset and
// length of piece i. It is the only chunk arithmetic in the package: ring
// chunks, pipeline segments and test expectations all come from it.
func partition(count, parts, i int) (off, n int) {
	q, r := count/parts, count%parts
	if i < r {
		return i * (q + 1), q + 1
	}
	return r*(q+1) + (i-r)*q, q
}

// pieces is the number of segments of at most seg elements that cover n
// elements (0 for n == 0).
func pieces(n, seg int) int {
	if n == 0 {
		return 0
	}
	return (n + seg - 1) / seg
}

// mod is the non-negative remainder of a modulo n.
func mod(a, n int) int {
	a %= n
	if a < 0 {
		a += n
	}
	return a
}
