package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gorovod/gorovod/internal/dashboard"
	"github.com/gorovod/gorovod/internal/metrics"
)

// SummaryFile is the name of the plots that Launch leaves in
// Config.MetricsDir when the job is over.
const SummaryFile = "summary.svg"

// launchObserved runs the job with a metrics Store of its own, the
// dashboard on Config.Dashboard and the summary in Config.MetricsDir (see
// Launch).
func launchObserved(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	log := cfg.logger()
	st, err := NewMetricsStore(cfg)
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Warn("gorun: metrics", "err", err)
		}
	}()
	cfg.Metrics = st
	var dash *dashboard.Server
	if cfg.Dashboard != "" {
		dash, err = dashboard.Serve(ctx, dashboard.Config{Addr: cfg.Dashboard, Linger: cfg.DashboardLinger, Source: st, Logger: log})
		if err != nil {
			return fmt.Errorf("%w: --dashboard %s: %v", ErrConfig, cfg.Dashboard, err)
		}
		defer dash.Close()
		fmt.Fprintf(cfg.Stderr, "gorun: dashboard at %s\n", dash.URL())
	}
	jobErr := launchJob(ctx, cfg) // marks st ended
	if cfg.MetricsDir != "" {
		if err := writeSummary(filepath.Join(cfg.MetricsDir, SummaryFile), st); err != nil {
			log.Warn("gorun: the summary of the metrics", "err", err)
		}
	}
	if dash != nil && cfg.DashboardLinger > 0 && ctx.Err() == nil {
		fmt.Fprintf(cfg.Stderr, "gorun: the job is over; the dashboard stays at %s for %v (Ctrl-C ends it)\n",
			dash.URL(), cfg.DashboardLinger)
	}
	if dash != nil {
		if err := dash.Shutdown(ctx); err != nil && ctx.Err() == nil {
			log.Warn("gorun: dashboard", "err", err)
		}
	}
	return jobErr
}

// writeSummary writes the plots of src's snapshot to path (through a
// temporary file, renamed when complete).
func writeSummary(path string, src metrics.Source) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".summary-*.svg")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing left to remove
	if err := dashboard.WriteSummarySVG(tmp, src.Snapshot()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
