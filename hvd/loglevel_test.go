package hvd_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/internal/testutil"
	"github.com/gorovod/gorovod/jobenv"
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
		{"debug", jobenv.LauncherGorun, `level=DEBUG msg="hvd: joined the job" rank=0 launcher=gorun`},
		{"info", jobenv.LauncherGorun, ""},
		{"info", jobenv.LauncherTorchrun, `level=INFO msg="hvd: joined the job" rank=0 launcher=torchrun`},
		{"warn", jobenv.LauncherTorchrun, ""},
		{"ERROR", jobenv.LauncherTorchrun, ""},
	} {
		var sink testutil.SyncBuffer
		cfg := hvd.DefaultConfig()
		cfg.LogLevel = tc.level
		cfg.Logger, cfg.Plan = slog.New(slog.NewTextHandler(&sink, nil)), jobenv.JoinPlan{Launcher: tc.launcher}
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
	} else if !strings.Contains(err.Error(), jobenv.EnvLogLevel) {
		t.Errorf("error %v does not name %s", err, jobenv.EnvLogLevel)
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
		jobenv.EnvRank: "0", jobenv.EnvSize: "1", jobenv.EnvLocalRank: "0", jobenv.EnvLocalSize: "1",
		jobenv.EnvCrossRank: "0", jobenv.EnvCrossSize: "1", jobenv.EnvLogLevel: "debug",
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
