package hvd_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/internal/testutil"
	"github.com/gorovod/gorovod/runner"
)

// TestRuntimeLogLevel: the runtime logs at GOROVOD_LOG_LEVEL through its
// logger, whatever level the logger's handler has (here info, as
// slog.Default()'s): "debug" shows rank 0's debug record of the launcher
// under gorun, "warn" hides its info record under another launcher.
func TestRuntimeLogLevel(t *testing.T) {
	for _, tc := range []struct {
		level, launcher string
		want            string // "" when the record must not appear
	}{
		{"debug", runner.LauncherGorun, `level=DEBUG msg="hvd: joined the job" rank=0 launcher=gorun`},
		{"info", runner.LauncherGorun, ""},
		{"info", runner.LauncherTorchrun, `level=INFO msg="hvd: joined the job" rank=0 launcher=torchrun`},
		{"warn", runner.LauncherTorchrun, ""},
		{"ERROR", runner.LauncherTorchrun, ""},
	} {
		var sink testutil.SyncBuffer
		cfg := hvd.DefaultConfig()
		cfg.LogLevel = tc.level
		cfg.Logger, cfg.Plan = slog.New(slog.NewTextHandler(&sink, nil)), runner.JoinPlan{Launcher: tc.launcher}
		rt, err := hvd.NewRuntime(context.Background(), cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.level, err)
		}
		rt.Shutdown()
		got := sink.String()
		switch {
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("level %s under %s: logs lack %s:\n%s", tc.level, tc.launcher, tc.want, got)
		case tc.want == "" && strings.Contains(got, "joined the job"):
			t.Errorf("level %s under %s: the record passed:\n%s", tc.level, tc.launcher, got)
		}
	}
	cfg := hvd.DefaultConfig()
	cfg.LogLevel = "loud"
	if rt, err := hvd.NewRuntime(context.Background(), cfg); err == nil {
		rt.Shutdown()
		t.Fatal("NewRuntime accepted log level \"loud\"")
	} else if !strings.Contains(err.Error(), runner.EnvLogLevel) {
		t.Errorf("error %v does not name %s", err, runner.EnvLogLevel)
	}
}

// TestInitLogsAtTheJobLevel: the package-level Init logs through
// slog.Default()'s handler at the level GOROVOD_LOG_LEVEL names, and
// leaves slog.Default() as the program set it.
func TestInitLogsAtTheJobLevel(t *testing.T) {
	var sink testutil.SyncBuffer
	mine := slog.New(slog.NewTextHandler(&sink, nil)) // info, as slog's own default
	old := slog.Default()
	slog.SetDefault(mine)
	defer slog.SetDefault(old)
	for name, value := range map[string]string{
		runner.EnvRank: "0", runner.EnvSize: "1", runner.EnvLocalRank: "0", runner.EnvLocalSize: "1",
		runner.EnvCrossRank: "0", runner.EnvCrossSize: "1", runner.EnvLogLevel: "debug",
	} {
		t.Setenv(name, value)
	}
	if err := hvd.Init(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := hvd.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if slog.Default() != mine {
		t.Error("Init replaced slog.Default()")
	}
	if want := `level=DEBUG msg="hvd: joined the job" rank=0 launcher=gorun`; !strings.Contains(sink.String(), want) {
		t.Errorf("GOROVOD_LOG_LEVEL=debug: logs lack %s:\n%s", want, sink.String())
	}
	slog.Debug("the program's own debug record")
	if strings.Contains(sink.String(), "the program's own") {
		t.Error("the program's default logger now passes debug records")
	}
}
