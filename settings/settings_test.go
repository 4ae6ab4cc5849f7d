package settings_test

import (
	"testing"
	"time"

	"github.com/gorovod/gorovod/settings"
)

func TestDefaults(t *testing.T) {
	k := settings.Defaults()
	if k.Engine != settings.DefaultEngine() {
		t.Errorf("Defaults().Engine = %+v, DefaultEngine() = %+v", k.Engine, settings.DefaultEngine())
	}
	want := settings.Knobs{
		Engine: settings.Engine{FusionThreshold: 64 << 20, CycleTime: time.Millisecond, CacheCapacity: 1024,
			StallWarning: time.Minute, OpTimeout: 10 * time.Minute},
		StartTimeout: 30 * time.Second, LogLevel: "info",
	}
	if k != want {
		t.Errorf("Defaults() = %+v, want %+v", k, want)
	}
}
