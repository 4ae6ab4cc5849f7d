package runner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testutil"
)

// checkingSpawner is a fakeSpawner with a preflight that fails for "bad".
type checkingSpawner struct {
	*fakeSpawner
	mu      sync.Mutex
	checked []string
}

func (c *checkingSpawner) CheckHosts(_ context.Context, hosts []string) error {
	c.mu.Lock()
	c.checked = append(c.checked, hosts...)
	c.mu.Unlock()
	if slices.Contains(hosts, "bad") {
		return errors.New("runner: ssh bad: connection refused")
	}
	return nil
}

func TestLaunchPreflightFailureStartsNothing(t *testing.T) {
	f := newFakeSpawner(t)
	c := &checkingSpawner{fakeSpawner: f}
	cfg := fakeConfig(t, f, "good:1,bad:1,other:1", 2, &testutil.SyncBuffer{})
	cfg.SpawnerFor = func(string) Spawner { return c }
	err := await(t, launchAsync(t.Context(), cfg), 5*time.Second)
	if err == nil || err.Error() != "runner: ssh bad: connection refused" {
		t.Errorf("Launch = %v, want the preflight error", err)
	}
	if f.proc(0) != nil {
		t.Errorf("a rank started despite the failed preflight")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if got := strings.Join(c.checked, ","); got != "good,bad" && got != "bad,good" {
		t.Errorf("checked %q, want the two used hosts", got)
	}
}
