package jobenv

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// taskIn runs DetectTask's reader on kv, on host "thishost" with parent 4242.
func taskIn(kv ...string) (Task, bool, error) {
	return detector{getenv: envOf(kv...), hostname: "thishost", ppid: 4242}.task()
}

// gorunRank is the contract gorun writes for rank of size on one host.
func gorunRank(rank, size int) []string {
	return []string{"GOROVOD_RANK=" + itoa(rank), "GOROVOD_SIZE=" + itoa(size), "GOROVOD_LOCAL_RANK=" + itoa(rank),
		"GOROVOD_LOCAL_SIZE=" + itoa(size), "GOROVOD_CROSS_RANK=0", "GOROVOD_CROSS_SIZE=1",
		"GOROVOD_RENDEZVOUS_ADDR=127.0.0.1:5000", "GOROVOD_SECRET=" + strings.Repeat("ab", 32)}
}

// slurmTask is rank procid of a Slurm step of 6 tasks on node[1-2], 3 each.
func slurmTask(procid int) []string {
	return []string{"SLURM_JOB_ID=77", "SLURM_STEP_ID=3", "SLURM_NTASKS=6", "SLURM_STEP_NUM_TASKS=6",
		"SLURM_STEP_NODELIST=node[1-2]", "SLURM_STEP_TASKS_PER_NODE=3(x2)", "SLURMD_NODENAME=node" + itoa(1+procid/3),
		"SLURM_PROCID=" + itoa(procid), "SLURM_LOCALID=" + itoa(procid%3), "SLURM_NODEID=" + itoa(procid/3)}
}

// psSpec is a TF_CONFIG spec of a chief, two workers and two servers.
const psSpec = `{"cluster":{"chief":["c:2222"],"worker":["w0:2222","w1:2222"],"ps":["p0:2223","p1:2223"],"evaluator":["e:1"]},"task":`

// wantTask is what DetectTask should find.
type wantTask struct {
	role                   string
	index, workers, server int
	rank, size             int
	host, chief, serve     string
	servers                []string
	launcher               string
}

func TestDetectTask(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want wantTask
	}{
		{"gorun chief", append(gorunRank(0, 5), "GOROVOD_PS_SERVERS=2"),
			wantTask{role: RoleChief, workers: 2, server: 2, size: 5, launcher: LauncherGorun}},
		{"gorun worker", append(gorunRank(2, 5), "GOROVOD_PS_SERVERS=2"),
			wantTask{role: RoleWorker, index: 1, workers: 2, server: 2, rank: 2, size: 5, launcher: LauncherGorun}},
		{"gorun first ps", append(gorunRank(3, 5), "GOROVOD_PS_SERVERS=2"),
			wantTask{role: RolePS, workers: 2, server: 2, rank: 3, size: 5, launcher: LauncherGorun}},
		{"gorun last ps", append(gorunRank(4, 5), "GOROVOD_PS_SERVERS=2"),
			wantTask{role: RolePS, index: 1, workers: 2, server: 2, rank: 4, size: 5, launcher: LauncherGorun}},
		{"gorun smallest job", append(gorunRank(1, 3), "GOROVOD_PS_SERVERS=1"),
			wantTask{role: RoleWorker, workers: 1, server: 1, rank: 1, size: 3, launcher: LauncherGorun}},
		{"slurm chief serves the rendezvous", append(slurmTask(0), "GOROVOD_PS_SERVERS=1"),
			wantTask{role: RoleChief, workers: 4, server: 1, size: 6, host: "node1", launcher: LauncherSlurm,
				serve: ":" + itoa(DerivedPort("slurm-77.3"))}},
		{"slurm worker", append(slurmTask(4), "GOROVOD_PS_SERVERS=1"),
			wantTask{role: RoleWorker, index: 3, workers: 4, server: 1, rank: 4, size: 6, host: "node2", launcher: LauncherSlurm}},
		{"slurm ps", append(slurmTask(5), "GOROVOD_PS_SERVERS=1"),
			wantTask{role: RolePS, workers: 4, server: 1, rank: 5, size: 6, host: "node2", launcher: LauncherSlurm}},
		{"torchrun ps", []string{"RANK=3", "WORLD_SIZE=4", "MASTER_ADDR=m", "MASTER_PORT=29500", "GOROVOD_PS_SERVERS=2"},
			wantTask{role: RolePS, index: 1, workers: 1, server: 2, rank: 3, size: 4, host: "thishost", launcher: LauncherTorchrun}},
		{"cluster spec worker", []string{`GOROVOD_CLUSTER={"hosts":["a:2","b:2"],"port":4000,"index":1}`, "GOROVOD_PS_SERVERS=1"},
			wantTask{role: RoleWorker, workers: 2, server: 1, rank: 1, size: 4, host: "a", launcher: LauncherCluster}},
		{"TF_CONFIG chief", []string{"TF_CONFIG=" + psSpec + `{"type":"chief","index":0}}`},
			wantTask{role: RoleChief, workers: 2, server: 2, size: 5, host: "c", chief: "c:2222",
				servers: []string{"p0:2223", "p1:2223"}, launcher: LauncherTFConfig}},
		{"TF_CONFIG worker", []string{"TF_CONFIG=" + psSpec + `{"type":"worker","index":1}}`},
			wantTask{role: RoleWorker, index: 1, workers: 2, server: 2, rank: 2, size: 5, host: "w1", chief: "c:2222",
				servers: []string{"p0:2223", "p1:2223"}, launcher: LauncherTFConfig}},
		{"TF_CONFIG ps", []string{"TF_CONFIG=" + psSpec + `{"type":"ps","index":1}}`},
			wantTask{role: RolePS, index: 1, workers: 2, server: 2, rank: 4, size: 5, host: "p1", chief: "c:2222",
				servers: []string{"p0:2223", "p1:2223"}, launcher: LauncherTFConfig}},
		{"TF_CONFIG master is the chief", []string{`TF_CONFIG={"cluster":{"master":["m:1"],"worker":["w:1"],"ps":["p:1"]},"task":{"type":"master","index":0}}`},
			wantTask{role: RoleChief, workers: 1, server: 1, size: 3, host: "m", chief: "m:1",
				servers: []string{"p:1"}, launcher: LauncherTFConfig}},
		{"GOROVOD_CLUSTER in TF shape", []string{"GOROVOD_CLUSTER=" + psSpec + `{"type":"ps","index":0}}`},
			wantTask{role: RolePS, workers: 2, server: 2, rank: 3, size: 5, host: "p0", chief: "c:2222",
				servers: []string{"p0:2223", "p1:2223"}, launcher: LauncherCluster}},
		{"TF_CONFIG evaluator", []string{"TF_CONFIG=" + psSpec + `{"type":"evaluator","index":0}}`},
			wantTask{role: RoleEvaluator, workers: 2, server: 2, size: 1, host: "e", chief: "c:2222",
				servers: []string{"p0:2223", "p1:2223"}, launcher: LauncherTFConfig}},
		{"TF_CONFIG evaluator of an all-reduce job", []string{`TF_CONFIG={"cluster":{"chief":["c:1"],"worker":["w:1"],"evaluator":["e:1"]},"task":{"type":"evaluator","index":0}}`},
			wantTask{role: RoleEvaluator, workers: 1, size: 1, host: "e", chief: "c:1", launcher: LauncherTFConfig}},
		{"gorun evaluator", []string{"GOROVOD_ROLE=evaluator", "GOROVOD_HOSTNAME=h0", "GOROVOD_SECRET=" + strings.Repeat("ab", 32)},
			wantTask{role: RoleEvaluator, size: 1, host: "h0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task, ok, err := taskIn(tt.env...)
			if err != nil || !ok {
				t.Fatalf("ok %v, err %v", ok, err)
			}
			w := tt.want
			got := []any{task.Role, task.Index, task.Workers, task.Servers, task.Env.Rank, task.Env.Size, task.Plan.Launcher, task.ChiefAddr}
			exp := []any{w.role, w.index, w.workers, w.server, w.rank, w.size, w.launcher, w.chief}
			if !slices.Equal(got, exp) {
				t.Errorf("role, index, workers, servers, rank, size, launcher, chief = %v, want %v", got, exp)
			}
			if w.host != "" && task.Env.Hostname != w.host {
				t.Errorf("host %q, want %q", task.Env.Hostname, w.host)
			}
			if task.Plan.ServeAddr != w.serve {
				t.Errorf("serve %q, want %q", task.Plan.ServeAddr, w.serve)
			}
			if !slices.Equal(task.ServerAddrs, w.servers) {
				t.Errorf("server addresses %q, want %q", task.ServerAddrs, w.servers)
			}
			if w.role != RoleEvaluator && len(task.Env.Secret) != 32 {
				t.Errorf("secret of %d bytes", len(task.Env.Secret))
			}
		})
	}
}

// TestDetectTaskTFConfigTopology: under TF_CONFIG every task works out
// the same secret, and local ranks count the tasks of each host.
func TestDetectTaskTFConfigTopology(t *testing.T) {
	spec := `{"cluster":{"chief":["h:1"],"worker":["h:2","g:2"],"ps":["h:3"]},"task":`
	ps, _, err1 := taskIn("TF_CONFIG=" + spec + `{"type":"ps","index":0}}`)
	chief, _, err2 := taskIn("TF_CONFIG=" + spec + `{"type":"chief","index":0}}`)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	if string(ps.Env.Secret) != string(chief.Env.Secret) {
		t.Error("the chief and the ps derive different secrets")
	}
	if got := []int{ps.Env.LocalRank, ps.Env.LocalSize}; !slices.Equal(got, []int{2, 3}) {
		t.Errorf("ps local rank, size = %v, want [2 3]", got)
	}
	if len(ps.Plan.Notes) != 1 {
		t.Errorf("notes %q: want one that says the secret is a token", ps.Plan.Notes)
	}
}

// TestDetectTaskNotPS: all-reduce jobs and processes alone are no PS job.
func TestDetectTaskNotPS(t *testing.T) {
	for name, env := range map[string][]string{
		"alone":             nil,
		"gorun":             gorunRank(1, 3),
		"slurm":             slurmTask(2),
		"TF_CONFIG":         {"TF_CONFIG=" + tfSpec(`{"type":"worker","index":0}`)},
		"MPI before a spec": {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=1", "TF_CONFIG=" + psSpec + `{"type":"ps","index":0}}`},
	} {
		t.Run(name, func(t *testing.T) {
			if _, ok, err := taskIn(env...); ok || err != nil {
				t.Errorf("ok %v, err %v: want an all-reduce job", ok, err)
			}
		})
	}
}

// TestDetectTaskErrors: every malformed PS environment is a clear error.
func TestDetectTaskErrors(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		is   error
		want []string
	}{
		{"too few ranks", append(gorunRank(0, 3), "GOROVOD_PS_SERVERS=2"), ErrEnv,
			[]string{"GOROVOD_PS_SERVERS=2", "2 parameter servers need at least 4 processes", "the job has 3 (gorun)"}},
		{"no servers", append(gorunRank(0, 3), "GOROVOD_PS_SERVERS=0"), ErrEnv, []string{`GOROVOD_PS_SERVERS="0"`, "at least 1"}},
		{"not a number", append(gorunRank(0, 3), "GOROVOD_PS_SERVERS=two"), ErrEnv, []string{`GOROVOD_PS_SERVERS="two"`}},
		{"slurm too small", append(slurmTask(0), "GOROVOD_PS_SERVERS=5"), ErrEnv,
			[]string{"5 parameter servers need at least 7 processes", "the job has 6 (slurm)"}},
		{"alone", []string{"GOROVOD_PS_SERVERS=1"}, ErrEnv, []string{"need at least 3 processes", "the job has 1 (no launcher)"}},
		{"bad launcher", []string{"GOROVOD_PS_SERVERS=1", "RANK=0", "WORLD_SIZE=4"}, ErrLauncher, []string{"torchrun"}},
		{"unknown role", []string{"GOROVOD_ROLE=ps"}, ErrEnv, []string{`GOROVOD_ROLE="ps"`, `only role it sets is "evaluator"`}},
		{"evaluator with a rank", append(gorunRank(0, 3), "GOROVOD_ROLE=evaluator"), ErrEnv, []string{"not a rank"}},
		{"evaluator bad secret", []string{"GOROVOD_ROLE=evaluator", "GOROVOD_SECRET=zz"}, ErrEnv, []string{"GOROVOD_SECRET", "redacted"}},
		{"ps without chief", []string{`TF_CONFIG={"cluster":{"worker":["w:1"],"ps":["p:1"]},"task":{"type":"ps","index":0}}`}, ErrLauncher,
			[]string{"tfconfig", "TF_CONFIG=", `"ps" tasks (1) but no "chief"`}},
		{"ps without worker", []string{`TF_CONFIG={"cluster":{"chief":["c:1"],"ps":["p:1"]},"task":{"type":"chief","index":0}}`}, ErrLauncher,
			[]string{`no "worker" task`}},
		{"ps index out of range", []string{"TF_CONFIG=" + psSpec + `{"type":"ps","index":2}}`}, ErrLauncher,
			[]string{`index 2 is out of range: "cluster" has 2 "ps" tasks`}},
		{"unknown task type", []string{"TF_CONFIG=" + psSpec + `{"type":"server","index":0}}`}, ErrLauncher,
			[]string{`type "server" is not in "cluster"`}},
		{"unknown cluster type", []string{`TF_CONFIG={"cluster":{"chief":["c:1"],"worker":["w:1"],"servers":["p:1"]},"task":{"type":"chief","index":0}}`}, ErrLauncher,
			[]string{`unknown task type "servers"`}},
		{"two chiefs", []string{`TF_CONFIG={"cluster":{"chief":["c:1"],"master":["m:1"],"worker":["w:1"],"ps":["p:1"]},"task":{"type":"chief","index":0}}`}, ErrLauncher,
			[]string{"2 chief tasks"}},
		{"both ways of naming servers", []string{"TF_CONFIG=" + psSpec + `{"type":"ps","index":0}}`, "GOROVOD_PS_SERVERS=2"}, ErrLauncher,
			[]string{"GOROVOD_PS_SERVERS=2 is set", "unset it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ok, err := taskIn(tt.env...)
			if err == nil || ok {
				t.Fatalf("ok %v, err %v: want an error", ok, err)
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("%v does not wrap %v", err, tt.is)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestDetectRefusesPSJob: Detect (hvd.Init's reader) fails in every PS
// task's environment, naming the task and package ps, and keeps TF_CONFIG
// without "ps" an all-reduce job.
func TestDetectRefusesPSJob(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  []string
		want []string
	}{
		{"gorun ps", append(gorunRank(4, 5), "GOROVOD_PS_SERVERS=2"), []string{"rank 4 of 5", "parameter server 1", "ps.Run"}},
		{"gorun worker", append(gorunRank(1, 5), "GOROVOD_PS_SERVERS=2"), []string{"rank 1 of 5", "worker 0"}},
		{"slurm chief", append(slurmTask(0), "GOROVOD_PS_SERVERS=1"), []string{"rank 0 of 6", "the chief"}},
		{"evaluator", []string{"GOROVOD_ROLE=evaluator"}, []string{"the evaluator", "evaluator.Run"}},
		{"TF_CONFIG ps", []string{"TF_CONFIG=" + psSpec + `{"type":"worker","index":0}}`}, []string{`"ps" tasks (2)`, "ps.Run"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := detectIn(tt.env...)
			if !errors.Is(err, ErrPSJob) {
				t.Fatalf("err %v: want ErrPSJob", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	if _, _, err := detectIn("TF_CONFIG=" + tfSpec(`{"type":"chief","index":0}`)); err != nil {
		t.Errorf("TF_CONFIG without ps: %v", err)
	}
}

// TestSidecarEnviron: the evaluator's environment carries no rank, and
// DetectTask reads it back as the evaluator with its host, secret and knobs.
func TestSidecarEnviron(t *testing.T) {
	e := DefaultEnv().ForSlot(Slot{Host: "h1", Rank: 2, Size: 4, LocalRank: 1, LocalSize: 2, CrossSize: 1})
	e.RendezvousAddr, e.Secret, e.FusionThreshold = "127.0.0.1:9", []byte(strings.Repeat("k", 32)), 77
	kv := e.SidecarEnviron()
	for _, entry := range kv {
		name, _, _ := strings.Cut(entry, "=")
		if slices.Contains([]string{EnvRank, EnvSize, EnvLocalRank, EnvLocalSize, EnvCrossRank, EnvCrossSize, EnvRendezvousAddr}, name) {
			t.Errorf("the evaluator's environment holds %s", entry)
		}
	}
	task, ok, err := taskIn(append(kv, EnvRole+"="+RoleEvaluator)...)
	if err != nil || !ok || task.Role != RoleEvaluator {
		t.Fatalf("role %q ok %v err %v", task.Role, ok, err)
	}
	if task.Env.Hostname != "h1" || string(task.Env.Secret) != string(e.Secret) || task.Env.FusionThreshold != 77 {
		t.Errorf("host %q, secret kept %v, fusion %d", task.Env.Hostname, string(task.Env.Secret) == string(e.Secret), task.Env.FusionThreshold)
	}
}
