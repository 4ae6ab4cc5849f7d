// Command labrank is a rank of launchtest's emulated multi-host test. It
// joins the job and all-reduces (sum) a float32 vector of 1 MiB whose
// first element is its rank + 1 and whose others are 1, then prints one
// line with where it ran and what it got:
//
//	rank=R size=S local_rank=L local_size=LS cross_rank=C cross_size=CS host=HOSTNAME sum=X vector=V
//
// X, the first element of the sum, is S(S+1)/2, and V, every other
// element, is S. It then checks an all-gather of uneven rows and a
// broadcast from the last rank. When a result is wrong, or joining fails,
// it says so on standard error and exits with status 1.
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/kernels"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("labrank: ")
	ctx := context.Background()
	if err := hvd.Init(ctx); err != nil {
		log.Fatal(err)
	}
	data := make([]float32, 1<<18) // 1 MiB: several segments on every link
	for i := range data {
		data[i] = 1
	}
	data[0] = float32(hvd.Rank() + 1)
	v := hvd.NewTensor("v", data)
	if err := hvd.Allreduce(ctx, v, kernels.Sum, hvd.ReduceOptions{}); err != nil {
		log.Fatal(err)
	}
	sum := hvd.Values[float32](v)
	size := float32(hvd.Size())
	for i, e := range sum[1:] {
		if e != size {
			log.Fatalf("element %d of the sum is %v, want %v", i+1, e, size)
		}
	}
	// Rank r contributes r+1 rows of 3 to an all-gather, and the last rank
	// broadcasts 100 KiB; both must arrive whole (in two levels under
	// --hierarchical-allreduce on).
	rows := make([]int32, 3*(hvd.Rank()+1))
	for i := range rows {
		rows[i] = int32(1000*hvd.Rank() + i)
	}
	all, err := hvd.Allgather(ctx, hvd.NewTensor("rows", rows, hvd.Rank()+1, 3))
	if err != nil {
		log.Fatal(err)
	}
	got, k := hvd.Values[int32](all), 0
	for r := range hvd.Size() {
		for i := range 3 * (r + 1) {
			if got[k] != int32(1000*r+i) {
				log.Fatalf("all-gather element %d is %d, want %d", k, got[k], 1000*r+i)
			}
			k++
		}
	}
	b := make([]uint8, 100<<10)
	if hvd.Rank() == hvd.Size()-1 {
		for i := range b {
			b[i] = uint8(i * 7)
		}
	}
	if err := hvd.Broadcast(ctx, hvd.NewTensor("b", b), hvd.Size()-1); err != nil {
		log.Fatal(err)
	}
	for i, x := range b {
		if x != uint8(i*7) {
			log.Fatalf("broadcast byte %d is %d, want %d", i, x, uint8(i*7))
		}
	}
	host, _ := os.Hostname()
	fmt.Printf("rank=%d size=%d local_rank=%d local_size=%d cross_rank=%d cross_size=%d host=%s sum=%v vector=%v\n",
		hvd.Rank(), hvd.Size(), hvd.LocalRank(), hvd.LocalSize(), hvd.CrossRank(), hvd.CrossSize(), host, sum[0], sum[1])
	hvd.Shutdown()
}
