package kernels_test

import (
	"fmt"

	"github.com/gorovod/gorovod/kernels"
)

func Example() {
	// Two ranks' gradients, reduced in place into a and then averaged.
	a := []float32{1, 2, 3, 4}
	b := []float32{10, 20, 30, 40}
	if err := kernels.Reduce(kernels.F32, kernels.Average, kernels.AsBytes(a), kernels.AsBytes(b)); err != nil {
		fmt.Println(err)
		return
	}
	if err := kernels.Scale(kernels.F32, kernels.AsBytes(a), 1.0/2); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(a)

	// float16 keeps 11 significant bits: 2049 rounds to the even neighbour.
	h := kernels.ToFloat16(2049)
	fmt.Printf("%#04x %v %v\n", uint16(h), h.Float32(), kernels.ToFloat16(70000).Float32())

	// Errors wrap the package's sentinels.
	err := kernels.Reduce(kernels.F64, kernels.Sum, make([]byte, 8), make([]byte, 16))
	fmt.Println(err)
	// Output:
	// [5.5 11 16.5 22]
	// 0x6800 2048 +Inf
	// kernels: bad buffer length: reduce sum: dst has 8 bytes, src has 16
}
