package jobenv

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/auth"
	"github.com/gorovod/gorovod/settings"
)

// getenvOf turns "NAME=value" entries into a getenv function.
func getenvOf(kv ...string) func(string) string {
	m := make(map[string]string, len(kv))
	for _, e := range kv {
		name, value, _ := strings.Cut(e, "=")
		m[name] = value
	}
	return func(name string) string { return m[name] }
}

// testSecret is a fixed, recognisable job secret.
var testSecret = bytes.Repeat([]byte{0xab}, auth.SecretSize)

// jobEnv returns a valid environment of rank 1 in a 4-rank job on 2 hosts.
func jobEnv() Env {
	e := DefaultEnv()
	e.Rank, e.Size, e.LocalRank, e.LocalSize, e.CrossRank, e.CrossSize = 1, 4, 1, 2, 0, 2
	e.Hostname, e.RendezvousAddr, e.Secret = "node1", "10.0.0.1:7070", testSecret
	return e
}

func TestDefaultEnv(t *testing.T) {
	e := DefaultEnv()
	if e.Rank != 0 || e.Size != 1 || e.LocalSize != 1 || e.CrossSize != 1 ||
		e.FusionThreshold != 64<<20 || e.CycleTime != time.Millisecond || e.CacheCapacity != 1024 ||
		e.StallWarning != 60*time.Second || e.StallShutdown != 0 || e.LogLevel != "info" || e.OpTimeout != 10*time.Minute {
		t.Fatalf("DefaultEnv = %+v", e)
	}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestFromEnvironAbsent(t *testing.T) {
	e, present, err := FromEnviron(getenvOf())
	if err != nil || present || !reflect.DeepEqual(e, DefaultEnv()) {
		t.Fatalf("FromEnviron(empty) = %+v, %v, %v", e, present, err)
	}
	// Knobs apply to a single rank too.
	e, present, err = FromEnviron(getenvOf(EnvFusionThreshold+"=0", EnvCycleTime+"=5ms", EnvLogLevel+"=debug"))
	want := DefaultEnv()
	want.FusionThreshold, want.CycleTime, want.LogLevel = 0, 5*time.Millisecond, "debug"
	if err != nil || present || !reflect.DeepEqual(e, want) {
		t.Fatalf("FromEnviron(knobs) = %+v, %v, %v", e, present, err)
	}
}

func TestFromEnvironJob(t *testing.T) {
	want := jobEnv()
	e, present, err := FromEnviron(getenvOf(
		"GOROVOD_RANK=1", "GOROVOD_SIZE=4", "GOROVOD_LOCAL_RANK=1", "GOROVOD_LOCAL_SIZE=2",
		"GOROVOD_CROSS_RANK=0", "GOROVOD_CROSS_SIZE=2", "GOROVOD_HOSTNAME=node1",
		"GOROVOD_RENDEZVOUS_ADDR=10.0.0.1:7070", "GOROVOD_SECRET="+strings.Repeat("AB", auth.SecretSize),
	))
	if err != nil || !present || !reflect.DeepEqual(e, want) {
		t.Fatalf("FromEnviron = %+v, %v, %v; want %+v", e, present, err, want)
	}
}

func TestFromEnvironErrors(t *testing.T) {
	job := jobEnv().Environ()
	tests := []struct {
		name string
		kv   []string
		want []string
	}{
		{"bad int", append(job, EnvSize+"=four"), []string{`GOROVOD_SIZE="four": not a decimal integer`}},
		{"huge int", append(job, EnvCacheCapacity+"=99999999999999999999"), []string{"GOROVOD_CACHE_CAPACITY", "out of range"}},
		{"bad duration", append(job, EnvCycleTime+"=5"), []string{`GOROVOD_CYCLE_TIME="5": not a Go duration`}},
		{"two bad", append(job, EnvCycleTime+"=x", EnvOpTimeout+"=y"), []string{"GOROVOD_CYCLE_TIME", "GOROVOD_OP_TIMEOUT"}},
		{"missing", dropVar(job, EnvLocalSize), []string{"GOROVOD_LOCAL_SIZE is not set (GOROVOD_RANK is)"}},
		{"identity without rank", dropVar(job, EnvRank), []string{"GOROVOD_SIZE is set but GOROVOD_RANK is not"}},
		{"secret without rank", []string{EnvSecret + "=00"}, []string{"GOROVOD_SECRET is set but GOROVOD_RANK is not"}},
		{"rank out of range", append(job, EnvRank+"=4"), []string{"GOROVOD_RANK=4: must be in [0, GOROVOD_SIZE=4)"}},
		{"short secret", append(job, EnvSecret+"=abcd"), []string{"secret is 2 bytes, want 32"}},
		{"bad level", append(job, EnvLogLevel+"=loud"), []string{`GOROVOD_LOG_LEVEL="loud"`}},
	}
	for _, tt := range tests {
		_, _, err := FromEnviron(getenvOf(tt.kv...))
		if !errors.Is(err, ErrEnv) {
			t.Errorf("%s: err = %v, want ErrEnv", tt.name, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", tt.name, err, w)
			}
		}
	}
}

// dropVar returns kv without the entry for name.
func dropVar(kv []string, name string) []string {
	var out []string
	for _, e := range kv {
		if !strings.HasPrefix(e, name+"=") {
			out = append(out, e)
		}
	}
	return out
}

func TestFromEnvironHidesSecret(t *testing.T) {
	bad := "zz" + hex.EncodeToString(testSecret)
	_, _, err := FromEnviron(getenvOf(append(jobEnv().Environ(), EnvSecret+"="+bad)...))
	if err == nil || strings.Contains(err.Error(), bad[2:12]) || !strings.Contains(err.Error(), "not hexadecimal") {
		t.Fatalf("error %q must reject the secret without quoting it", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(e *Env)
		want   []string // one per broken invariant
	}{
		{"size", func(e *Env) { e.Size = 0 }, []string{"GOROVOD_SIZE=0: must be at least 1",
			"GOROVOD_RANK=1: must be in [0, GOROVOD_SIZE=0)", "GOROVOD_LOCAL_SIZE=2: must be in [1, GOROVOD_SIZE=0]",
			"GOROVOD_CROSS_SIZE=2: must be in [1, GOROVOD_SIZE=0]"}},
		{"negative rank", func(e *Env) { e.Rank = -1 }, []string{"GOROVOD_RANK=-1"}},
		{"local rank", func(e *Env) { e.LocalRank = 2 }, []string{"GOROVOD_LOCAL_RANK=2: must be in [0, GOROVOD_LOCAL_SIZE=2)"}},
		{"cross rank", func(e *Env) { e.CrossRank = 5 }, []string{"GOROVOD_CROSS_RANK=5: must be in [0, GOROVOD_CROSS_SIZE=2)"}},
		{"no rendezvous", func(e *Env) { e.RendezvousAddr = "" }, []string{"more than one rank needs GOROVOD_RENDEZVOUS_ADDR"}},
		{"bad rendezvous", func(e *Env) { e.RendezvousAddr = "nohost" }, []string{"want host:port"}},
		{"bad port", func(e *Env) { e.RendezvousAddr = "a:99999" }, []string{"want host:port"}},
		{"no secret", func(e *Env) { e.Secret = nil }, []string{"GOROVOD_RENDEZVOUS_ADDR is set but GOROVOD_SECRET is not"}},
		{"short secret", func(e *Env) { e.Secret = e.Secret[:16] }, []string{"secret is 16 bytes, want 32"}},
		{"knobs", func(e *Env) {
			e.StartTimeout, e.FusionThreshold, e.CycleTime, e.CacheCapacity = 0, -1, 0, -1
			e.StallWarning, e.StallShutdown, e.OpTimeout, e.LogLevel = -1, -1, -1, "chatty"
		}, []string{"GOROVOD_START_TIMEOUT=0s: must be positive", "GOROVOD_FUSION_THRESHOLD=-1",
			"GOROVOD_CYCLE_TIME=0s: must be positive", "GOROVOD_CACHE_CAPACITY=-1", "GOROVOD_STALL_CHECK_TIME=-1ns",
			"GOROVOD_STALL_SHUTDOWN_TIME=-1ns", "GOROVOD_OP_TIMEOUT=-1ns", `GOROVOD_LOG_LEVEL="chatty"`}},
		{"stall order", func(e *Env) { e.StallShutdown = time.Second },
			[]string{"GOROVOD_STALL_SHUTDOWN_TIME=1s: must not be shorter than GOROVOD_STALL_CHECK_TIME=1m0s"}},
		{"NUL", func(e *Env) { e.TimelinePath = "a\x00b" }, []string{"GOROVOD_TIMELINE: value holds a NUL byte"}},
	}
	for _, tt := range tests {
		e := jobEnv()
		e.Secret = bytes.Clone(e.Secret)
		tt.change(&e)
		err := e.Validate()
		if !errors.Is(err, ErrEnv) {
			t.Errorf("%s: Validate = %v, want ErrEnv", tt.name, err)
			continue
		}
		lines := strings.Split(err.Error(), "\n")
		if len(lines) != len(tt.want) {
			t.Errorf("%s: %d messages, want %d:\n%v", tt.name, len(lines), len(tt.want), err)
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", tt.name, err, w)
			}
		}
		for _, l := range lines {
			if !strings.HasPrefix(l, "jobenv: ") {
				t.Errorf("%s: message %q lacks the package prefix", tt.name, l)
			}
		}
	}
	if err := jobEnv().Validate(); err != nil {
		t.Fatalf("jobEnv: %v", err)
	}
}

func TestEnvironRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		want := randomEnv(rng)
		kv := want.Environ()
		if len(kv) != len(envVars()) {
			t.Fatalf("Environ has %d entries, want %d", len(kv), len(envVars()))
		}
		got, present, err := FromEnviron(getenvOf(kv...))
		if err != nil || !present || !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d: FromEnviron(Environ(%#v)) = %#v, %v, %v\nsecret %x vs %x",
				i, want, got, present, err, want.Secret, got.Secret)
		}
	}
}

// randomEnv draws a valid Env, including edge values.
func randomEnv(rng *rand.Rand) Env {
	// pick returns one of the edge values, or a random value between the first and the last.
	pick := func(edges ...int64) int64 {
		lo, hi := edges[0], edges[len(edges)-1]
		if rng.IntN(3) == 0 {
			return edges[rng.IntN(len(edges))]
		}
		return lo + rng.Int64N(hi-lo)
	}
	dur := func(edges ...int64) time.Duration { return time.Duration(pick(edges...)) }
	size := 1 + rng.IntN(64)
	e := Env{Size: size, Rank: rng.IntN(size), LocalSize: 1 + rng.IntN(size), CrossSize: 1 + rng.IntN(size)}
	e.LocalRank, e.CrossRank = rng.IntN(e.LocalSize), rng.IntN(e.CrossSize)
	e.Hostname = randomText(rng)
	if size > 1 || rng.IntN(2) == 0 {
		e.RendezvousAddr = fmt.Sprintf("[fd00::%x]:%d", rng.IntN(1<<16), 1+rng.IntN(65535))
		e.Secret = make([]byte, auth.SecretSize)
		for i := range e.Secret {
			e.Secret[i] = byte(rng.Uint32())
		}
	}
	e.BindAddr, e.TimelinePath = randomText(rng), randomText(rng)
	e.StartTimeout = dur(1, int64(time.Hour), 1<<63-1)
	e.FusionThreshold = pick(0, 1, 64<<20, 1<<63-1)
	e.CycleTime = dur(1, 1e6, 1<<63-1)
	e.CacheCapacity = int(pick(0, 1, 1024, 1<<62))
	e.StallWarning = dur(0, 1, 60e9, 1<<62)
	if rng.IntN(2) == 0 {
		e.StallShutdown = e.StallWarning + dur(0, 1, 1<<61)
	}
	e.OpTimeout = dur(0, 1, 1e9, 1<<63-1)
	e.LogLevel = []string{"debug", "info", "warn", "error", "DEBUG", "warn+2", "info-1"}[rng.IntN(7)]
	return e
}

// randomText returns "" or text with spaces, '=', unicode and punctuation.
func randomText(rng *rand.Rand) string {
	const alphabet = "aZ0 _-./:=%#,\"'\\é日\t"
	runes := []rune(alphabet)
	b := make([]rune, rng.IntN(12))
	for i := range b {
		b[i] = runes[rng.IntN(len(runes))]
	}
	return string(b)
}

func FuzzEnvRoundTrip(f *testing.F) {
	f.Add(uint16(0), uint16(0), uint16(0), int64(0), int64(1), "host", "/tmp/t", "info")
	f.Add(uint16(7), uint16(3), uint16(5), int64(-5), int64(1<<62), "", "", "warn")
	f.Fuzz(func(t *testing.T, rank, local, cross uint16, fusion, cycle int64, host, timeline, level string) {
		e := jobEnv()
		e.Size = int(rank) + int(local) + int(cross) + 1
		e.Rank, e.LocalRank, e.LocalSize = int(rank), int(local), int(local)+1
		e.CrossRank, e.CrossSize = int(cross), int(cross)+1
		e.FusionThreshold, e.CycleTime = fusion, time.Duration(cycle)
		e.Hostname, e.TimelinePath, e.LogLevel = host, timeline, level
		got, _, err := FromEnviron(getenvOf(e.Environ()...))
		if e.Validate() != nil {
			// Empty values read back as defaults, so an invalid env may come back valid.
			if err == nil && got.Validate() != nil {
				t.Fatalf("FromEnviron returned invalid %v without error", got)
			}
			return
		}
		if err != nil || !reflect.DeepEqual(got, e) {
			t.Fatalf("FromEnviron(Environ(%v)) = %v, %v", e, got, err)
		}
	})
}

func TestSecretNeverPrinted(t *testing.T) {
	e := jobEnv()
	hexSecret := hex.EncodeToString(e.Secret)
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("env", "env", e)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("env", "env", e, "ptr", &e)
	outputs := []string{e.String(), logged.String(), strings.Join(RedactEnviron(e.Environ()), " ")}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T %v"} {
		outputs = append(outputs, fmt.Sprintf(verb, e), fmt.Sprintf(verb, &e), fmt.Sprintf(verb, []Env{e}))
	}
	for _, out := range outputs {
		if strings.Contains(strings.ToLower(out), hexSecret) || strings.Contains(out, "171 171 171") ||
			strings.Contains(out, "0xab, 0xab") || strings.Contains(out, "q6urq6ur") {
			t.Fatalf("secret printed: %s", out)
		}
	}
	if !strings.Contains(e.String(), "GOROVOD_SECRET=<redacted>") || !strings.Contains(e.String(), "GOROVOD_RANK=1") {
		t.Fatalf("String = %s", e)
	}
	if !strings.Contains(logged.String(), `"secret":"<redacted>"`) || !strings.Contains(logged.String(), `"local_rank":"1"`) {
		t.Fatalf("slog output = %s", logged.String())
	}
	if got := RedactEnviron([]string{"GOROVOD_SECRET=", "A=b", "GOROVOD_SECRET=ff"}); !reflect.DeepEqual(got,
		[]string{"GOROVOD_SECRET=", "A=b", "GOROVOD_SECRET=<redacted>"}) {
		t.Fatalf("RedactEnviron = %q", got)
	}
}

func TestForSlot(t *testing.T) {
	slots := SlotsOf([]string{"a", "a", "b"}) // runner.Assign of a:2,b:2 for 3 ranks
	base := jobEnv()
	for _, s := range slots {
		e := base.ForSlot(s)
		if err := e.Validate(); err != nil {
			t.Fatalf("slot %+v: %v", s, err)
		}
		got, _, err := FromEnviron(getenvOf(e.Environ()...))
		if err != nil {
			t.Fatal(err)
		}
		back := Slot{got.Hostname, got.Rank, got.LocalRank, got.LocalSize, got.CrossRank, got.CrossSize, got.Size}
		if back != s || got.RendezvousAddr != base.RendezvousAddr || !bytes.Equal(got.Secret, base.Secret) {
			t.Fatalf("slot %+v came back as %+v (%v)", s, back, got)
		}
	}
}

func TestSlogLevel(t *testing.T) {
	for in, want := range map[string]slog.Level{"debug": slog.LevelDebug, "INFO": slog.LevelInfo,
		"warn": slog.LevelWarn, "error": slog.LevelError, "debug-4": slog.LevelDebug - 4} {
		e := Env{Knobs: settings.Knobs{LogLevel: in}}
		if got, err := e.SlogLevel(); err != nil || got != want {
			t.Errorf("SlogLevel(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := (Env{}).SlogLevel(); !errors.Is(err, ErrEnv) {
		t.Errorf("SlogLevel(\"\") = %v, want ErrEnv", err)
	}
}
