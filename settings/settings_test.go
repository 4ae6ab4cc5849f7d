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

func TestParseSwitch(t *testing.T) {
	for in, want := range map[string]settings.Switch{"auto": settings.Auto, "ON": settings.On, " off ": settings.Off,
		"1": settings.On, "true": settings.On, "0": settings.Off, "False": settings.Off} {
		got, err := settings.ParseSwitch(in)
		if err != nil || got != want {
			t.Errorf("ParseSwitch(%q) = %v, %v; want %v", in, got, err, want)
		}
		if back, err := settings.ParseSwitch(got.String()); err != nil || back != got {
			t.Errorf("ParseSwitch(%q) = %v, %v; want %v", got.String(), back, err, got)
		}
	}
	for _, bad := range []string{"", "yes", "2", "auto-ish"} {
		if _, err := settings.ParseSwitch(bad); err == nil {
			t.Errorf("ParseSwitch(%q) accepted", bad)
		}
	}
	if s := settings.Switch(9).String(); s != "Switch(9)" {
		t.Errorf("Switch(9).String() = %q", s)
	}
}
