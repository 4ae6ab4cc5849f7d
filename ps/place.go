package ps

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/gorovod/gorovod/kernels"
)

// VarSpec describes a variable to place: its name (unique in a Place
// call), its shape (the first dimension counts the rows) and its element
// type.
type VarSpec struct {
	Name  string
	Shape []int
	DType kernels.DType
}

// Shard is one row block of a variable and the server that holds it.
type Shard struct {
	Rows   RowRange
	Server int   // index of the server, 0 to Placement.Servers-1
	Bytes  int64 // Rows.Len() times the bytes of one row
}

// VarPlacement is one variable's shards, in row order.
type VarPlacement struct {
	VarSpec
	Shards []Shard
}

// Placement is the result of Place: every variable, in the order given,
// with its shards and their servers.
type Placement struct {
	Servers int
	Vars    []VarPlacement
}

// ServerBytes returns the bytes each server holds.
func (p Placement) ServerBytes() []int64 {
	out := make([]int64, p.Servers)
	for _, v := range p.Vars {
		for _, s := range v.Shards {
			out[s.Server] += s.Bytes
		}
	}
	return out
}

// Var returns the placement of the variable named name.
func (p Placement) Var(name string) (VarPlacement, bool) {
	for _, v := range p.Vars {
		if v.Name == name {
			return v, true
		}
	}
	return VarPlacement{}, false
}

// Place splits every variable into the row shards p chooses (laid out by
// Split) and assigns them to servers 0 to servers-1, balancing bytes: the
// shards are taken largest first (ties in the order of vars, then in row
// order) and each goes to the server holding the fewest bytes so far (ties
// to the lowest index). The result depends only on the arguments. Place
// fails if servers is not positive, p is nil, a name is empty or repeated,
// a DType is invalid, a shape is empty or has a non-positive dimension, or
// p fails or returns a count outside 1 to the variable's rows.
func Place(vars []VarSpec, servers int, p Partitioner) (Placement, error) {
	if servers <= 0 {
		return Placement{}, fmt.Errorf("ps: Place: servers must be positive, got %d", servers)
	}
	if p == nil {
		return Placement{}, errors.New("ps: Place: nil partitioner")
	}
	pl := Placement{Servers: servers, Vars: make([]VarPlacement, len(vars))}
	seen := make(map[string]int, len(vars))
	type ref struct{ v, s int }
	var order []ref
	for i, v := range vars {
		if v.Name == "" {
			return Placement{}, fmt.Errorf("ps: Place: variable %d has no name", i)
		}
		if j, dup := seen[v.Name]; dup {
			return Placement{}, fmt.Errorf("ps: Place: variable %q appears twice (entries %d and %d)", v.Name, j, i)
		}
		seen[v.Name] = i
		if !v.DType.Valid() {
			return Placement{}, fmt.Errorf("ps: Place: variable %q: invalid dtype %v", v.Name, v.DType)
		}
		rows, rowBytes, err := rowSize(v.Shape, v.DType.Size())
		if err != nil {
			return Placement{}, fmt.Errorf("ps: Place: variable %q: %w", v.Name, err)
		}
		n, err := p.Shards(v.Shape, v.DType.Size())
		if err != nil {
			return Placement{}, fmt.Errorf("ps: Place: variable %q: %w", v.Name, err)
		}
		if n < 1 || n > rows {
			return Placement{}, fmt.Errorf("ps: Place: variable %q: partitioner chose %d shards for %d rows", v.Name, n, rows)
		}
		spec := v
		spec.Shape = slices.Clone(v.Shape)
		shards := make([]Shard, n)
		for k, r := range Split(rows, n) {
			shards[k] = Shard{Rows: r, Bytes: int64(r.Len()) * rowBytes}
			order = append(order, ref{i, k})
		}
		pl.Vars[i] = VarPlacement{VarSpec: spec, Shards: shards}
	}
	// order was built in (variable, shard) order, so a stable sort by
	// size leaves ties in that order.
	slices.SortStableFunc(order, func(a, b ref) int {
		return cmp.Compare(pl.Vars[b.v].Shards[b.s].Bytes, pl.Vars[a.v].Shards[a.s].Bytes)
	})
	load := make([]int64, servers)
	for _, r := range order {
		sh := &pl.Vars[r.v].Shards[r.s]
		best := 0
		for s := 1; s < servers; s++ {
			if load[s] < load[best] {
				best = s
			}
		}
		sh.Server = best
		load[best] += sh.Bytes
	}
	return pl, nil
}
