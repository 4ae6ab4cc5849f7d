package ps_test

import (
	"fmt"

	"github.com/gorovod/gorovod/kernels"
	"github.com/gorovod/gorovod/ps"
)

// The rule parameter-server jobs usually take: shards of at least 256 KiB,
// at most one per server. The 100 KiB bias stays whole, the 1 MiB layer
// and the 3 MiB embedding are split in two, one shard on each server.
func Example() {
	const servers = 2
	p, err := ps.MinSizePartitioner(256<<10, servers)
	if err != nil {
		panic(err)
	}
	vars := []ps.VarSpec{
		{Name: "embedding", Shape: []int{3072, 256}, DType: kernels.F32},   // 3 MiB
		{Name: "dense/kernel", Shape: []int{512, 512}, DType: kernels.F32}, // 1 MiB
		{Name: "dense/bias", Shape: []int{25600}, DType: kernels.F32},      // 100 KiB
	}
	pl, err := ps.Place(vars, servers, p)
	if err != nil {
		panic(err)
	}
	for _, v := range pl.Vars {
		for _, s := range v.Shards {
			fmt.Printf("%-12s rows [%5d,%5d) %5d KiB on server %d\n", v.Name, s.Rows.Start, s.Rows.End, s.Bytes>>10, s.Server)
		}
	}
	fmt.Println("KiB per server:", kib(pl.ServerBytes()))
	// Output:
	// embedding    rows [    0, 1536)  1536 KiB on server 0
	// embedding    rows [ 1536, 3072)  1536 KiB on server 1
	// dense/kernel rows [    0,  256)   512 KiB on server 0
	// dense/kernel rows [  256,  512)   512 KiB on server 1
	// dense/bias   rows [    0,25600)   100 KiB on server 0
	// KiB per server: [2148 2048]
}

func kib(b []int64) []int64 {
	out := make([]int64, len(b))
	for i, n := range b {
		out[i] = n >> 10
	}
	return out
}
