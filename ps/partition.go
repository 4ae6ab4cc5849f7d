package ps

import (
	"errors"
	"fmt"
	"math"
)

// A Partitioner chooses the number of row shards of a variable: shape is
// its shape (the first dimension counts the rows; every dimension must be
// positive) and elemSize the bytes of one element. Shards returns a count
// from 1 to the number of rows, or an error for an empty shape, a
// non-positive dimension or element size, or a variable whose size in bytes
// overflows an int64.
type Partitioner interface {
	Shards(shape []int, elemSize int) (int, error)
}

// MinSizePartitioner returns a Partitioner with TensorFlow's rule of the
// same name: a variable of B bytes gets ceil(B/minShardBytes) row shards,
// capped by maxShards and by its rows, and at least one. A variable smaller
// than minShardBytes stays in one shard; shards of a larger one may fall
// below the minimum (300 KiB with a 256 KiB minimum makes two of 150 KiB),
// as TensorFlow's do. It fails unless both arguments are positive.
func MinSizePartitioner(minShardBytes int64, maxShards int) (Partitioner, error) {
	if minShardBytes <= 0 {
		return nil, fmt.Errorf("ps: MinSizePartitioner: min shard bytes must be positive, got %d", minShardBytes)
	}
	if maxShards <= 0 {
		return nil, fmt.Errorf("ps: MinSizePartitioner: max shards must be positive, got %d", maxShards)
	}
	return minSize{minShardBytes, maxShards}, nil
}

// MaxSizePartitioner returns a Partitioner that splits a variable into as
// few row shards as keep every shard at most maxShardBytes, capped by
// maxShards (math.MaxInt for no cap). A shard is never less than a row, so
// a variable whose rows are each larger than maxShardBytes gets one shard
// per row (up to maxShards). It fails unless both arguments are positive.
func MaxSizePartitioner(maxShardBytes int64, maxShards int) (Partitioner, error) {
	if maxShardBytes <= 0 {
		return nil, fmt.Errorf("ps: MaxSizePartitioner: max shard bytes must be positive, got %d", maxShardBytes)
	}
	if maxShards <= 0 {
		return nil, fmt.Errorf("ps: MaxSizePartitioner: max shards must be positive, got %d", maxShards)
	}
	return maxSize{maxShardBytes, maxShards}, nil
}

// FixedShardsPartitioner returns a Partitioner that splits every variable
// into n row shards, or into one per row if it has fewer than n rows. It
// fails unless n is positive.
func FixedShardsPartitioner(n int) (Partitioner, error) {
	if n <= 0 {
		return nil, fmt.Errorf("ps: FixedShardsPartitioner: shards must be positive, got %d", n)
	}
	return fixedShards{n}, nil
}

type minSize struct {
	minShardBytes int64
	maxShards     int
}

func (p minSize) Shards(shape []int, elemSize int) (int, error) {
	rows, rowBytes, err := rowSize(shape, elemSize)
	if err != nil {
		return 0, err
	}
	// rowSize has checked that rows × rowBytes fits an int64.
	n := ceilDiv(int64(rows)*rowBytes, p.minShardBytes)
	return clampShards(n, p.maxShards, rows), nil
}

func (p minSize) String() string {
	return fmt.Sprintf("MinSizePartitioner(%d, %d)", p.minShardBytes, p.maxShards)
}

type maxSize struct {
	maxShardBytes int64
	maxShards     int
}

func (p maxSize) Shards(shape []int, elemSize int) (int, error) {
	rows, rowBytes, err := rowSize(shape, elemSize)
	if err != nil {
		return 0, err
	}
	// The largest shard of Split(rows, n) has ceil(rows/n) rows, so n
	// shards stay within the maximum when that is at most maxRows.
	maxRows := max(1, p.maxShardBytes/rowBytes)
	n := ceilDiv(int64(rows), maxRows)
	return clampShards(n, p.maxShards, rows), nil
}

func (p maxSize) String() string {
	return fmt.Sprintf("MaxSizePartitioner(%d, %d)", p.maxShardBytes, p.maxShards)
}

type fixedShards struct{ n int }

func (p fixedShards) Shards(shape []int, elemSize int) (int, error) {
	rows, _, err := rowSize(shape, elemSize)
	if err != nil {
		return 0, err
	}
	return clampShards(int64(p.n), p.n, rows), nil
}

func (p fixedShards) String() string { return fmt.Sprintf("FixedShardsPartitioner(%d)", p.n) }

// clampShards bounds n to [1, min(maxShards, rows)].
func clampShards(n int64, maxShards, rows int) int {
	return int(max(1, min(n, int64(maxShards), int64(rows))))
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// rowSize checks a variable's shape and element size and returns its
// number of rows and the bytes of one row.
func rowSize(shape []int, elemSize int) (rows int, rowBytes int64, err error) {
	if len(shape) == 0 {
		return 0, 0, errors.New("ps: shape is empty (a scalar has no rows to split)")
	}
	if elemSize <= 0 {
		return 0, 0, fmt.Errorf("ps: element size must be positive, got %d", elemSize)
	}
	for _, d := range shape {
		if d <= 0 {
			return 0, 0, fmt.Errorf("ps: shape %v: every dimension must be positive", shape)
		}
	}
	total := int64(elemSize)
	for _, d := range shape {
		if total > math.MaxInt64/int64(d) {
			return 0, 0, fmt.Errorf("ps: shape %v of %d-byte elements: size overflows int64", shape, elemSize)
		}
		total *= int64(d)
	}
	return shape[0], total / int64(shape[0]), nil
}

// RowRange is the half-open block of rows [Start, End) of a variable.
type RowRange struct {
	Start, End int
}

// Len is the number of rows in r.
func (r RowRange) Len() int { return r.End - r.Start }

// Split divides rows into shards contiguous blocks in order, covering
// every row exactly once; as in TensorFlow, the first rows%shards blocks
// hold one row more than the others. It panics unless 1 <= shards <= rows
// (the partitioners never return more shards than rows).
func Split(rows, shards int) []RowRange {
	if shards < 1 || shards > rows {
		panic(fmt.Sprintf("ps: Split(%d, %d): need 1 <= shards <= rows", rows, shards))
	}
	out := make([]RowRange, shards)
	base, extra := rows/shards, rows%shards
	start := 0
	for i := range out {
		n := base
		if i < extra {
			n++
		}
		out[i] = RowRange{start, start + n}
		start += n
	}
	return out
}
