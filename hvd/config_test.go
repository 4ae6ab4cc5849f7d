package hvd_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/internal/auth"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/settings"
)

// TestConfigFromEnv: gorun's contract comes back as the Config's fields,
// knobs included, with gorun as the launcher; no variable at all is
// DefaultConfig.
func TestConfigFromEnv(t *testing.T) {
	env := jobenv.DefaultEnv()
	env.Rank, env.Size, env.LocalRank, env.LocalSize, env.CrossRank, env.CrossSize = 3, 4, 1, 2, 1, 2
	env.Hostname, env.RendezvousAddr, env.Secret = "b", "10.0.0.1:5000", bytes.Repeat([]byte{7}, auth.SecretSize)
	env.CycleTime, env.NoSharedMemory = 5*time.Millisecond, true
	vars := map[string]string{}
	for _, kv := range env.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		vars[name] = value
	}
	cfg, err := hvd.ConfigFromEnv(func(name string) string { return vars[name] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Rank != 3 || cfg.Size != 4 || cfg.LocalRank != 1 || cfg.LocalSize != 2 || cfg.CrossRank != 1 || cfg.CrossSize != 2 ||
		cfg.Hostname != "b" || cfg.RendezvousAddr != env.RendezvousAddr || !bytes.Equal(cfg.Secret, env.Secret) ||
		cfg.Knobs != env.Knobs || cfg.Plan.Launcher != jobenv.LauncherGorun {
		t.Errorf("ConfigFromEnv = %v (knobs %+v), want %v", cfg, cfg.Knobs, env)
	}
	alone, err := hvd.ConfigFromEnv(func(string) string { return "" })
	def := hvd.DefaultConfig()
	if err != nil || alone.Rank != 0 || alone.Size != 1 || alone.Knobs != settings.Defaults() || def.Size != 1 || def.Knobs != settings.Defaults() {
		t.Errorf("without a launcher: %v, %v; DefaultConfig %v", alone, err, def)
	}
	if _, err := hvd.ConfigFromEnv(func(name string) string { return map[string]string{jobenv.EnvSize: "2"}[name] }); err == nil {
		t.Error("GOROVOD_SIZE without GOROVOD_RANK accepted")
	}
}

// TestConfigRedactsSecret: no fmt verb and no slog record shows the secret.
func TestConfigRedactsSecret(t *testing.T) {
	cfg := hvd.DefaultConfig()
	cfg.Size, cfg.LocalSize, cfg.RendezvousAddr = 2, 2, "127.0.0.1:1"
	cfg.Secret = bytes.Repeat([]byte{0xab}, auth.SecretSize)
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "cfg", cfg)
	out := fmt.Sprintf("%v %+v %#v %s %x %q", cfg, cfg, cfg, cfg, cfg, cfg) + logged.String()
	if strings.Contains(out, hex.EncodeToString(cfg.Secret)) || strings.Contains(out, "171") || !strings.Contains(out, "<redacted>") {
		t.Errorf("the secret shows:\n%s", out)
	}
}
