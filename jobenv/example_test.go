package jobenv_test

import (
	"fmt"
	"strings"

	"github.com/gorovod/gorovod/internal/auth"
	"github.com/gorovod/gorovod/jobenv"
)

func ExampleEnv_Environ() {
	slots := jobenv.SlotsOf([]string{"a", "a", "b", "b"}) // runner.Assign of -H a:2,b:2

	job := jobenv.DefaultEnv()
	job.RendezvousAddr = "10.0.0.1:7070"
	job.Secret = make([]byte, auth.SecretSize) // use runner.NewSecret in real code

	worker := job.ForSlot(slots[3]) // what the launcher gives rank 3
	kv := worker.Environ()
	fmt.Println(strings.Join(jobenv.RedactEnviron(kv[:9]), "\n"))

	getenv := func(name string) string { // what the worker reads
		for _, e := range kv {
			if k, v, _ := strings.Cut(e, "="); k == name {
				return v
			}
		}
		return ""
	}
	got, present, err := jobenv.FromEnviron(getenv)
	fmt.Println(got.Rank, got.LocalRank, got.CrossRank, present, err)
	// Output:
	// GOROVOD_RANK=3
	// GOROVOD_SIZE=4
	// GOROVOD_LOCAL_RANK=1
	// GOROVOD_LOCAL_SIZE=2
	// GOROVOD_CROSS_RANK=1
	// GOROVOD_CROSS_SIZE=2
	// GOROVOD_HOSTNAME=b
	// GOROVOD_RENDEZVOUS_ADDR=10.0.0.1:7070
	// GOROVOD_SECRET=<redacted>
	// 3 1 1 true <nil>
}
