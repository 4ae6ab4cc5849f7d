package runner

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/jobenv"
)

func TestConfigValidate(t *testing.T) {
	valid := func() Config {
		c := DefaultConfig()
		c.NP = 2
		c.Command = []string{"./train"}
		return c
	}
	remote, _ := ParseHosts("localhost:1,node9:2")
	tests := []struct {
		name   string
		change func(c *Config)
		target error  // nil: valid
		want   string // substring of the message
	}{
		{"default localhost", func(c *Config) {}, nil, ""},
		{"remote with bind address", func(c *Config) { c.Hosts, c.BindAddr = remote, "10.0.0.1" }, nil, ""},
		{"bind address with port", func(c *Config) { c.BindAddr = "[::1]:7000" }, nil, ""},
		{"remote with interface", func(c *Config) { c.Hosts, c.NetworkInterface = remote, "eth0" }, nil, ""},
		{"np zero", func(c *Config) { c.NP = 0 }, ErrNumProc, "0 processes"},
		{"np over slots", func(c *Config) { c.NP, c.Hosts, c.BindAddr = 4, remote, "10.0.0.1" }, ErrSlots, "-np 4 exceeds the 3 slots"},
		{"no command", func(c *Config) { c.Command = nil }, ErrConfig, "no program to run"},
		{"empty program", func(c *Config) { c.Command = []string{""} }, ErrConfig, "program name is empty"},
		{"negative grace", func(c *Config) { c.GracePeriod = -time.Second }, ErrConfig, "grace period -1s"},
		{"ssh port", func(c *Config) { c.SSHPort = 70000 }, ErrConfig, "ssh port 70000"},
		{"remote without address", func(c *Config) { c.Hosts = remote }, nil, ""},
		{"unspecified bind address", func(c *Config) { c.BindAddr = "0.0.0.0" }, ErrConfig, "--bind-addr 0.0.0.0: ranks cannot dial an unspecified address"},
		{"bad bind port", func(c *Config) { c.BindAddr = "h:port" }, ErrConfig, `--bind-addr "h:port": want host or host:port`},
		{"forward GOROVOD", func(c *Config) { c.ForwardEnv = []string{"GOROVOD_RANK"} }, ErrConfig, "-x GOROVOD_RANK"},
		{"forward empty", func(c *Config) { c.ForwardEnv = []string{"=x"} }, ErrConfig, `-x "=x"`},
		{"zero start timeout", func(c *Config) { c.StartTimeout = 0 }, jobenv.ErrEnv, "GOROVOD_START_TIMEOUT=0s"},
		{"zero cycle time", func(c *Config) { c.CycleTime = 0 }, jobenv.ErrEnv, "GOROVOD_CYCLE_TIME=0s"},
		{"bad log level", func(c *Config) { c.LogLevel = "loud" }, jobenv.ErrEnv, "GOROVOD_LOG_LEVEL"},
		{"elastic", func(c *Config) { c.MinNP, c.ResetLimit = 1, 3 }, nil, ""},
		{"min-np over np", func(c *Config) { c.MinNP = 3 }, ErrConfig, "--min-np 3 is not in 0..2"},
		{"negative min-np", func(c *Config) { c.MinNP = -1 }, ErrConfig, "--min-np -1"},
		{"reset limit alone", func(c *Config) { c.ResetLimit = 2 }, ErrConfig, "--reset-limit needs an elastic job"},
		{"negative reset limit", func(c *Config) { c.MinNP, c.ResetLimit = 1, -1 }, ErrConfig, "--reset-limit -1 is negative"},
		{"elastic srun", func(c *Config) { c.MinNP, c.Launcher = 1, SpawnSrun }, ErrConfig, "cannot run its ranks as srun steps"},
		{"elastic sets below min-np", func(c *Config) { c.NP, c.MinNP, c.ProcessSets = 4, 2, "0,1;1" }, nil, ""},
		{"elastic set past min-np", func(c *Config) { c.NP, c.MinNP, c.ProcessSets = 4, 2, "0,1;0,2" }, ErrConfig, "the set [0 2] names rank 2, but this elastic job may shrink to 2 ranks"},
		{"max-np set past np", func(c *Config) { c.MaxNP, c.ProcessSets = 4, "0,2" }, ErrConfig, "the set [0 2] names rank 2, but this elastic job may shrink to 2 ranks"},
		{"fixed job sets", func(c *Config) { c.ProcessSets = "0,1" }, nil, ""},
		{"output ranks", func(c *Config) { c.OutputRanks = []int{0, 1} }, nil, ""},
		{"output rank beyond np", func(c *Config) { c.OutputRanks = []int{2} }, ErrConfig, "--output-ranks 2 is not a rank of -np 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.change(&c)
			err := c.Validate()
			if tt.target == nil {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.target) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want %v containing %q", err, tt.target, tt.want)
			}
			if n := strings.Count(err.Error(), "\n") + 1; n != 1 {
				t.Errorf("Validate gave %d messages for one broken invariant:\n%v", n, err)
			}
		})
	}
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	c := DefaultConfig()
	c.NP, c.Command, c.CycleTime = 0, nil, 0
	err := c.Validate()
	for _, target := range []error{ErrNumProc, ErrConfig, jobenv.ErrEnv} {
		if !errors.Is(err, target) {
			t.Errorf("Validate = %v, want it to wrap %v", err, target)
		}
	}
}

func TestListenAddr(t *testing.T) {
	for _, tt := range []struct{ bind, want string }{
		{"", "127.0.0.1:0"},
		{"10.1.2.3", "10.1.2.3:0"},
		{"10.1.2.3:7070", "10.1.2.3:7070"},
		{"fd00::1", "[fd00::1]:0"},
		{"[fd00::1]:7070", "[fd00::1]:7070"},
		{"head.example", "head.example:0"},
	} {
		c := Config{BindAddr: tt.bind}
		if got, err := c.listenAddr(); got != tt.want || err != nil {
			t.Errorf("BindAddr %q: listenAddr = %q, %v; want %q", tt.bind, got, err, tt.want)
		}
	}
	lo, err := Config{NetworkInterface: "lo"}.listenAddr()
	if err != nil || lo != "127.0.0.1:0" {
		t.Errorf("NetworkInterface lo: listenAddr = %q, %v; want 127.0.0.1:0", lo, err)
	}
	_, err = Config{NetworkInterface: "no-such-if0"}.listenAddr()
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "no-such-if0") {
		t.Errorf("missing interface: %v, want ErrConfig naming it", err)
	}
}

func TestIsLocalHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LocalHost": true, "127.0.0.1": true, "::1": true,
		"node1": false, "127.0.0.2": false, "10.0.0.1": false,
	} {
		if got := IsLocalHost(host); got != want {
			t.Errorf("IsLocalHost(%q) = %v, want %v", host, got, want)
		}
	}
}
