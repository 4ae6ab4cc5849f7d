package hvd

import (
	"errors"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/jobenv"
)

// TestRoleFromEnvironment: the roles of a PS job, of an all-reduce job's
// ranks and of a process alone; a malformed environment is an error.
func TestRoleFromEnvironment(t *testing.T) {
	gorun := func(rank, size string, more ...string) []string {
		return append([]string{"GOROVOD_RANK=" + rank, "GOROVOD_SIZE=" + size, "GOROVOD_LOCAL_RANK=" + rank,
			"GOROVOD_LOCAL_SIZE=" + size, "GOROVOD_CROSS_RANK=0", "GOROVOD_CROSS_SIZE=1",
			"GOROVOD_RENDEZVOUS_ADDR=127.0.0.1:5000", "GOROVOD_SECRET=" + strings.Repeat("ab", 32)}, more...)
	}
	ps := `TF_CONFIG={"cluster":{"chief":["c:1"],"worker":["w:1"],"ps":["p:1"]},"task":{"type":"ps","index":0}}`
	for _, tt := range []struct {
		name string
		env  []string
		want string
	}{
		{"alone", nil, jobenv.RoleChief},
		{"all-reduce rank 0", gorun("0", "2"), jobenv.RoleChief},
		{"all-reduce rank 1", gorun("1", "2"), jobenv.RoleWorker},
		{"ps job chief", gorun("0", "4", "GOROVOD_PS_SERVERS=1"), jobenv.RoleChief},
		{"ps job worker", gorun("2", "4", "GOROVOD_PS_SERVERS=1"), jobenv.RoleWorker},
		{"ps job server", gorun("3", "4", "GOROVOD_PS_SERVERS=1"), jobenv.RolePS},
		{"evaluator", []string{"GOROVOD_ROLE=evaluator"}, jobenv.RoleEvaluator},
		{"TF_CONFIG ps", []string{ps}, jobenv.RolePS},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := roleFrom(envGetter(tt.env))
			if err != nil || got != tt.want {
				t.Errorf("role %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	for name, env := range map[string][]string{
		"too few ranks":    gorun("0", "2", "GOROVOD_PS_SERVERS=1"),
		"bad launcher":     {"RANK=0", "WORLD_SIZE=3"},
		"ps without chief": {`TF_CONFIG={"cluster":{"worker":["w:1"],"ps":["p:1"]},"task":{"type":"ps","index":0}}`},
	} {
		if got, err := roleFrom(envGetter(env)); err == nil || !strings.HasPrefix(err.Error(), "hvd: ") {
			t.Errorf("%s: role %q, err %v: want an hvd error", name, got, err)
		}
	}
}

// TestConfigFromEnvRefusesPSJob: the reader of Init fails in a PS task's
// environment, pointing to package ps.
func TestConfigFromEnvRefusesPSJob(t *testing.T) {
	env := []string{"GOROVOD_RANK=3", "GOROVOD_SIZE=4", "GOROVOD_LOCAL_RANK=3", "GOROVOD_LOCAL_SIZE=4",
		"GOROVOD_CROSS_RANK=0", "GOROVOD_CROSS_SIZE=1", "GOROVOD_RENDEZVOUS_ADDR=127.0.0.1:5000",
		"GOROVOD_SECRET=" + strings.Repeat("ab", 32), "GOROVOD_PS_SERVERS=1"}
	_, err := ConfigFromEnv(envGetter(env))
	if !errors.Is(err, jobenv.ErrPSJob) || !strings.Contains(err.Error(), "ps.Run") {
		t.Errorf("err %v: want ErrPSJob naming ps.Run", err)
	}
}

// envGetter is a getenv over "NAME=value" entries.
func envGetter(kv []string) func(string) string {
	m := map[string]string{}
	for _, e := range kv {
		k, v, _ := strings.Cut(e, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

// TestInitRefusesEvaluator: Init in the evaluator's environment fails
// with an error that points to evaluator.Run, and Role answers.
func TestInitRefusesEvaluator(t *testing.T) {
	t.Setenv(jobenv.EnvRole, jobenv.RoleEvaluator)
	err := Init(t.Context())
	if err == nil {
		_ = Shutdown()
		t.Fatal("Init in the evaluator's environment: no error")
	}
	if !errors.Is(err, jobenv.ErrPSJob) || !strings.Contains(err.Error(), "evaluator.Run") {
		t.Errorf("err %v: want ErrPSJob naming evaluator.Run", err)
	}
	if role, err := Role(); role != jobenv.RoleEvaluator || err != nil {
		t.Errorf("Role() = %q, %v", role, err)
	}
}
