package launchtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestTorchrunStyleShellLoop: four processes started by a plain shell
// loop with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (as a Kubernetes
// Indexed Job or torchrun sets them) form one job.
func TestTorchrunStyleShellLoop(t *testing.T) {
	port := freePort(t)
	script := fmt.Sprintf(`pids=; for r in 0 1 2 3; do RANK=$r WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=%s "$0" & pids="$pids $!"; done
fail=0; for p in $pids; do wait $p || fail=1; done; exit $fail`, port)
	r := run(t, command(context.Background(), nil, "bash", "-c", script, bin(t, "hello")))
	mustSucceed(t, "shell loop", r)
	if strings.Count(r.stdout, "size=4 sum=10") != 1 {
		t.Errorf("stdout %q: want size=4 sum=10 once", r.stdout)
	}
	if !strings.Contains(r.stderr, "launcher=torchrun") || !strings.Contains(r.stderr, "GOROVOD_SECRET_FILE") {
		t.Errorf("rank 0 should log its launcher and warn that the job runs on a derived token:\n%s", r.stderr)
	}
}

// TestTFConfigShellLoop: a chief and two workers started by a shell with
// nothing but TF_CONFIG (as Kubeflow's TFJob sets it in each pod, and as
// the README's example does) form one job whose chief is rank 0.
func TestTFConfigShellLoop(t *testing.T) {
	port := freePort(t)
	script := fmt.Sprintf(`C='"cluster":{"chief":["127.0.0.1:%s"],"worker":["127.0.0.1:1","127.0.0.1:2"]}'
TF_CONFIG="{$C,\"task\":{\"type\":\"chief\",\"index\":0}}" "$0" & pids=$!
for i in 0 1; do TF_CONFIG="{$C,\"task\":{\"type\":\"worker\",\"index\":$i}}" "$0" & pids="$pids $!"; done
fail=0; for p in $pids; do wait $p || fail=1; done; exit $fail`, port)
	r := run(t, command(context.Background(), nil, "bash", "-c", script, bin(t, "hello")))
	mustSucceed(t, "TF_CONFIG shell loop", r)
	if strings.Count(r.stdout, "size=3 sum=6") != 1 {
		t.Errorf("stdout %q: want size=3 sum=6 once", r.stdout)
	}
	if !strings.Contains(r.stderr, "launcher=tfconfig") || !strings.Contains(r.stderr, "rendezvous=127.0.0.1:"+port) {
		t.Errorf("the chief should log its launcher and serve on its own address:\n%s", r.stderr)
	}
}
