package hvd

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/rendezvous"
)

// serveRendezvous starts, on rank 0 of a job that gorun did not start, the
// rendezvous that every rank joins (gorun serves it otherwise). It listens
// on plan.ServeAddr with the job's secret and serves one round: a rank
// that shut down and joins again while it still runs is told to retry,
// and finds the server that rank 0's own next Init starts on the port.
func serveRendezvous(env jobenv.Env, plan jobenv.JoinPlan, log *slog.Logger) (*rendezvous.Server, error) {
	srv, err := rendezvous.NewServer(rendezvous.ServerConfig{
		Addr: plan.ServeAddr, Secret: env.Secret, Size: env.Size, Hosts: plan.Hosts, Logger: warnings(log),
		SingleRound: true, // it stops once this rank's mesh forms; a re-Init serves a new one
		TLS:         env.TLS,
	})
	if err == nil {
		err = srv.Start()
	}
	if err != nil {
		return nil, fmt.Errorf("hvd: rank 0 on %s (%s) cannot serve the job's rendezvous on %s (set %s to a free port, the same for every rank): %w",
			env.Hostname, plan.Launcher, plan.ServeAddr, jobenv.EnvRendezvousPort, err)
	}
	return srv, nil
}

// runtimeLogger is the logger a runtime logs through: l (slog.Default()
// when nil) filtered at the level env.LogLevel names (GOROVOD_LOG_LEVEL,
// gorun's --log-level), with the rank attached. That level alone decides
// which of the runtime's records pass, whatever level l's handler is set
// to: "debug" shows them through the program's default logger (whose own
// level is info), "warn" hides their info records. The handler keeps the
// program's format and destination, and slog.Default() is left as it is.
// An empty LogLevel keeps l's own level.
func runtimeLogger(l *slog.Logger, env jobenv.Env) (*slog.Logger, error) {
	l, err := leveledLogger(l, env)
	if err != nil {
		return nil, err
	}
	return l.With("rank", env.Rank), nil
}

// leveledLogger is l (nil: slog.Default()) passing on the records at or
// above env's log level.
func leveledLogger(l *slog.Logger, env jobenv.Env) (*slog.Logger, error) {
	if l == nil {
		l = slog.Default()
	}
	if env.LogLevel != "" {
		level, err := env.SlogLevel()
		if err != nil {
			return nil, fmt.Errorf("hvd: %w", err)
		}
		l = slog.New(levelFilter{Handler: l.Handler(), min: level, own: true})
	}
	return l, nil
}

// warnings returns a logger that passes on l's warnings and errors only:
// the rendezvous server's routine messages repeat what rank 0 logs itself.
func warnings(l *slog.Logger) *slog.Logger {
	return slog.New(levelFilter{Handler: l.Handler(), min: slog.LevelWarn})
}

// levelFilter is a slog.Handler that drops records below min. With own
// set it decides alone, ignoring the level of the handler it wraps (which
// then only formats and writes); otherwise a record must pass both.
type levelFilter struct {
	slog.Handler
	min slog.Level
	own bool
}

// Enabled reports whether level is at least the minimum and, unless the
// filter decides alone, whether the wrapped handler enables it.
func (h levelFilter) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= h.min && (h.own || h.Handler.Enabled(ctx, level))
}

// WithAttrs keeps the filter on the derived handler.
func (h levelFilter) WithAttrs(attrs []slog.Attr) slog.Handler {
	return levelFilter{h.Handler.WithAttrs(attrs), h.min, h.own}
}

// WithGroup keeps the filter on the derived handler.
func (h levelFilter) WithGroup(name string) slog.Handler {
	return levelFilter{h.Handler.WithGroup(name), h.min, h.own}
}
