package hvd

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/gorovod/gorovod/runner"
	"github.com/gorovod/gorovod/runner/rendezvous"
)

// serveRendezvous starts, on rank 0 of a job that gorun did not start, the
// rendezvous that every rank joins (gorun serves it otherwise). It listens
// on plan.ServeAddr with the job's secret.
func serveRendezvous(env runner.WorkerEnv, plan runner.JoinPlan, log *slog.Logger) (*rendezvous.Server, error) {
	srv, err := rendezvous.NewServer(rendezvous.ServerConfig{
		Addr: plan.ServeAddr, Secret: env.Secret, Size: env.Size, Hosts: plan.Hosts, Logger: warnings(log),
	})
	if err == nil {
		err = srv.Start()
	}
	if err != nil {
		return nil, fmt.Errorf("hvd: rank 0 on %s (%s) cannot serve the job's rendezvous on %s (set %s to a free port, the same for every rank): %w",
			env.Hostname, plan.Launcher, plan.ServeAddr, runner.EnvRendezvousPort, err)
	}
	return srv, nil
}

// abortLinger is how long rank 0 keeps an aborted rendezvous up, so that
// ranks still waiting in it (their calls are held for at most about a
// second) learn why the job did not start.
const abortLinger = 1500 * time.Millisecond

// abortRendezvous makes every rank waiting in srv fail with rank 0's own
// error (which names the ranks that never came, when that is why), and
// returns after abortLinger.
func abortRendezvous(srv *rendezvous.Server, err error) {
	srv.Abort(err.Error())
	time.Sleep(abortLinger)
}

// warnings returns a logger that passes on l's warnings and errors only:
// the rendezvous server's routine messages repeat what rank 0 logs itself.
func warnings(l *slog.Logger) *slog.Logger {
	return slog.New(minLevel{l.Handler(), slog.LevelWarn})
}

// minLevel is a slog.Handler that drops records below a level.
type minLevel struct {
	slog.Handler
	min slog.Level
}

// Enabled reports whether level is at least the minimum and h enables it.
func (h minLevel) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= h.min && h.Handler.Enabled(ctx, level)
}

// WithAttrs keeps the minimum level on the derived handler.
func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(attrs), h.min}
}

// WithGroup keeps the minimum level on the derived handler.
func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}
