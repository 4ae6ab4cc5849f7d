package collective

// A schedule is what one rank does in one collective: a list of steps, each
// of which may send one segment to a peer and receive one segment from a
// peer. Schedules are pure data, built by pure functions of (rank, size,
// layout, segment size) and checked by tests without any goroutine. The
// executor runs them; it never knows which collective it runs.

// Buffer names which of the (at most two) buffers of an operation a segment
// lies in: most collectives work in place on BufMain, all-to-all reads
// BufMain and writes BufOut.
type Buffer uint8

// The buffers of an operation.
const (
	BufMain Buffer = iota
	BufOut
)

// Segment is a contiguous run of elements [Off, Off+Len) of one buffer.
type Segment struct {
	Buf      Buffer
	Off, Len int
}

func (s Segment) end() int { return s.Off + s.Len }

// overlaps reports whether s and o share at least one element.
func (s Segment) overlaps(o Segment) bool {
	return s.Buf == o.Buf && s.Len > 0 && o.Len > 0 && s.Off < o.end() && o.Off < s.end()
}

// Combine says what happens to a received segment.
type Combine uint8

// The ways a received segment is combined into the buffer.
const (
	// Copy receives straight into the buffer, overwriting it.
	Copy Combine = iota + 1
	// Reduce receives into scratch memory and then reduces it into the buffer.
	Reduce
)

// Step is one unit of a schedule. SendTo or RecvFrom is -1 when the step has
// no send or no receive. A step's send happens after every earlier receive
// that overlaps it; its receive happens after every send (this step's
// included) that overlaps it.
type Step struct {
	SendTo   int
	Send     Segment
	RecvFrom int
	Recv     Segment
	Combine  Combine
}

// layout places one chunk per rank: chunk i is [Off[i], Off[i]+Len[i]).
type layout struct {
	off, n []int
}

// evenLayout splits count elements into size nearly equal chunks.
func evenLayout(count, size int) layout {
	l := layout{make([]int, size), make([]int, size)}
	for i := range size {
		l.off[i], l.n[i] = partition(count, size, i)
	}
	return l
}

// countsLayout places chunks of the given lengths back to back.
func countsLayout(counts []int) layout {
	l := layout{make([]int, len(counts)), append([]int(nil), counts...)}
	for i := 1; i < len(counts); i++ {
		l.off[i] = l.off[i-1] + counts[i-1]
	}
	return l
}

// seg returns piece j of chunk c split into segments of at most seg elements.
func (l layout) seg(c, seg, j int, buf Buffer) Segment {
	off, n := partition(l.n[c], pieces(l.n[c], seg), j)
	return Segment{Buf: buf, Off: l.off[c] + off, Len: n}
}

// noStep is a step that does nothing; builders fill in one side or both.
func noStep() Step { return Step{SendTo: -1, RecvFrom: -1} }
