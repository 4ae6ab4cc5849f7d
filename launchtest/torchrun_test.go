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
