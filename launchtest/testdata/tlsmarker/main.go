// Command tlsmarker is a rank of launchtest's TLS sniffing test. It joins
// the job, broadcasts from rank 0 a 1 MiB byte tensor filled with
// MARKER-data (MARKER is its one argument), checks what arrived, and
// stores MARKER-kv under a key of its own in the job's rendezvous, over a
// connection of its own made as hvd makes its one (GOROVOD_TLS decides
// whether it runs inside TLS). On a failure it says so on standard error
// and exits with status 1.
package main

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/rendezvous"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("tlsmarker: ")
	if len(os.Args) != 2 {
		log.Fatal("usage: tlsmarker MARKER")
	}
	marker := os.Args[1]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env, _, err := jobenv.FromEnviron(os.Getenv) // before Init, which takes the secret out of the environment
	if err != nil {
		log.Fatal(err)
	}
	if err := hvd.Init(ctx); err != nil {
		log.Fatal(err)
	}
	defer hvd.Shutdown()
	want := bytes.Repeat([]byte(marker+"-data "), (1<<20)/(len(marker)+6))
	data := make([]uint8, len(want))
	if hvd.Rank() == 0 {
		copy(data, want)
	}
	t := hvd.NewTensor("marker", data)
	if err := hvd.Broadcast(ctx, t, 0); err != nil {
		log.Fatal(err)
	}
	if !bytes.Equal(hvd.Values[uint8](t), want) {
		log.Fatalf("rank %d: the broadcast arrived damaged", hvd.Rank())
	}
	rdv, err := rendezvous.Dial(ctx, env.RendezvousAddr, env.Secret, rendezvous.WithTLS(env.TLS))
	if err != nil {
		log.Fatal(err)
	}
	defer rdv.Close()
	if err := rdv.Set(ctx, fmt.Sprintf("tlsmarker/%d", hvd.Rank()), []byte(marker+"-kv")); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rank %d tls=%v ok\n", hvd.Rank(), env.TLS)
}
