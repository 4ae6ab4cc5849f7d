package settings

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// leaves lists the paths of Knobs' fields that hold a value ("Engine.CycleTime").
func leaves(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type.Kind() == reflect.Struct && f.Anonymous {
			out = append(out, leaves(f.Type, prefix+f.Name+".")...)
			continue
		}
		out = append(out, prefix+f.Name)
	}
	return out
}

// changed lists the fields of Knobs that differ between a and b.
func changed(a, b Knobs) []string {
	var out []string
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for _, path := range leaves(va.Type(), "") {
		fa, fb := va, vb
		for _, n := range strings.Split(path, ".") {
			fa, fb = fa.FieldByName(n), fb.FieldByName(n)
		}
		if !reflect.DeepEqual(fa.Interface(), fb.Interface()) {
			out = append(out, path)
		}
	}
	return out
}

// otherValue returns, for a knob's variable, a value that is not its default.
func otherValue(t *testing.T, k Knob, def string) string {
	t.Helper()
	for _, v := range []string{"2097152", "3ms", "1", "on", "/tmp/x", "debug"} {
		var knobs Knobs = Defaults()
		if v != def && k.Env(&knobs).Set(v) == nil {
			return v
		}
	}
	t.Fatalf("%s: no value to try", k.Var)
	return ""
}

// TestTableCoversKnobs: every field of Knobs is set by exactly one entry of
// Table, through its variable and through its flag, and each entry has the
// names and help that gorun and the ranks need, none taken twice.
func TestTableCoversKnobs(t *testing.T) {
	var covered, flags, vars []string
	for _, k := range Table() {
		if k.Flag == "" || !strings.HasPrefix(k.Var, "GOROVOD_") || k.Usage == "" || k.Env == nil {
			t.Errorf("incomplete entry %+v", k)
			continue
		}
		if slices.Contains(flags, k.Flag) || slices.Contains(vars, k.Var) {
			t.Errorf("%s or %s named twice", k.Flag, k.Var)
		}
		flags, vars = append(flags, append([]string{k.Flag}, k.Aliases...)...), append(vars, k.Var)
		if (k.Kind == KindBool) != (k.Bool != nil) || (k.Kind == KindBool) != (k.FlagText(new(Knobs)) == nil) {
			t.Errorf("%s: Kind %d, Bool set %v", k.Flag, k.Kind, k.Bool != nil)
		}
		def := Defaults()
		text := k.Env(&def).String()
		knobs := Defaults()
		if err := k.Env(&knobs).Set(otherValue(t, k, text)); err != nil {
			t.Fatal(err)
		}
		got := changed(Defaults(), knobs)
		if len(got) != 1 {
			t.Errorf("%s sets %v, want one field", k.Var, got)
			continue
		}
		covered = append(covered, got[0])
		back := Defaults()
		if err := k.Env(&back).Set(k.Env(&knobs).String()); err != nil || back != knobs {
			t.Errorf("%s: %q does not read back: %v", k.Var, k.Env(&knobs).String(), err)
		}
		back = Defaults()
		if k.Kind == KindBool {
			*k.Bool(&back) = *k.Bool(&knobs)
		} else if err := k.FlagText(&back).Set(k.FlagText(&knobs).String()); err != nil {
			t.Errorf("--%s: %q does not read back: %v", k.Flag, k.FlagText(&knobs).String(), err)
		}
		if f := changed(knobs, back); len(f) != 0 {
			t.Errorf("--%s at %q leaves %v different", k.Flag, k.FlagText(&knobs), f)
		}
	}
	all := leaves(reflect.TypeFor[Knobs](), "")
	slices.Sort(covered)
	slices.Sort(all)
	if !slices.Equal(covered, all) {
		t.Errorf("Table sets %v; Knobs has %v", covered, all)
	}
}

// TestFlagSpellings: the flags' units, and the values they refuse once the
// command line is read (Checker) with the value as it was written.
func TestFlagSpellings(t *testing.T) {
	flag := func(name string, knobs *Knobs) Value {
		for _, k := range Table() {
			if k.Flag == name {
				return k.FlagText(knobs)
			}
		}
		t.Fatalf("no flag %s", name)
		return nil
	}
	k := Defaults()
	for name, want := range map[string]string{"fusion-threshold-mb": "64", "cycle-time-ms": "1", "start-timeout": "30s",
		"op-timeout": "10m0s", "hierarchical-allreduce": "auto", "log-level": "info", "cache-capacity": "1024"} {
		if got := flag(name, &k).String(); got != want {
			t.Errorf("--%s shows %q, want %q", name, got, want)
		}
	}
	for _, tt := range []struct{ flag, in, check string }{
		{"fusion-threshold-mb", "-1", "-1: want 0..1048576"},
		{"fusion-threshold-mb", "1048577", "1048577: want 0..1048576"},
		{"cycle-time-ms", "0", "0: want a positive number of milliseconds"},
		{"hierarchical-allreduce", "sometimes", `"sometimes": want on, off or auto`},
	} {
		k := Defaults()
		v := flag(tt.flag, &k)
		if err := v.Set(tt.in); err != nil {
			t.Fatalf("--%s %s: %v", tt.flag, tt.in, err)
		}
		if err := v.(Checker).Check(); err == nil || err.Error() != tt.check {
			t.Errorf("--%s %s: Check = %v, want %q", tt.flag, tt.in, err, tt.check)
		}
		if k != Defaults() {
			t.Errorf("--%s %s changed the knobs: %+v", tt.flag, tt.in, k)
		}
	}
	k = Defaults()
	for name, in := range map[string]string{"fusion-threshold-mb": "2", "cycle-time-ms": "0.5", "stall-check-time": "90",
		"hierarchical-allreduce": "off"} {
		if err := flag(name, &k).Set(in); err != nil {
			t.Fatal(err)
		}
	}
	if k.FusionThreshold != 2<<20 || k.CycleTime != 500*time.Microsecond || k.StallWarning != 90*time.Second || k.Hierarchical != Off {
		t.Errorf("flags set %+v", k)
	}
	for _, in := range []string{"x", "1e400"} {
		if err := flag("cycle-time-ms", &k).Set(in); err == nil {
			t.Errorf("--cycle-time-ms %s: no error", in)
		}
	}
	if err := flag("fusion-threshold-mb", &k).Set("x"); err == nil || err.Error() != "parse error" {
		t.Errorf("--fusion-threshold-mb x: %v, want parse error", err)
	}
}
