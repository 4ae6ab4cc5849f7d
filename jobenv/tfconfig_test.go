package jobenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tfSpec is a TF_CONFIG of a chief and two workers on this host, task as given.
func tfSpec(task string) string {
	return `{"cluster":{"chief":["localhost:2222"],"worker":["localhost:2223","localhost:2224"]},"task":` + task + `}`
}

func TestParseTFConfig(t *testing.T) {
	c, err := ParseTFConfig([]byte(` {"cluster": {"worker": ["w0:1", "[::1]:2"], "evaluator": ["e:3"]},
		"task": {"type": "evaluator", "index": 0, "trial": "1"}, "environment": "cloud", "rpc_layer": "grpc"}` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Task != (TFTask{Type: TFEvaluator}) || strings.Join(c.Cluster[TFWorker], ",") != "w0:1,[::1]:2" ||
		strings.Join(c.Cluster[TFEvaluator], ",") != "e:3" || len(c.Cluster) != 2 {
		t.Errorf("parsed %+v", c)
	}
	if got := strings.Join(c.AllReduceAddrs(), ","); got != "w0:1,[::1]:2" {
		t.Errorf("all-reduce ranks %s, want the two workers", got)
	}
	m, err := ParseTFConfig([]byte(`{"cluster":{"worker":["w:1"],"master":["m:1"]},"task":{"type":"worker","index":0}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(m.AllReduceAddrs(), ","); got != "m:1,w:1" {
		t.Errorf("all-reduce ranks %s, want the master first", got)
	}
	if r, err := m.Rank(); r != 1 || err != nil {
		t.Errorf("worker 0 beside a master: rank %d, %v; want 1", r, err)
	}
}

// TestParseTFConfigErrors: every malformed shape is an error naming what
// is wrong.
func TestParseTFConfigErrors(t *testing.T) {
	cl := func(cluster string) string { return `{"cluster":` + cluster + `,"task":{"type":"worker","index":0}}` }
	tests := []struct {
		name, in string
		want     []string // substrings of the error
	}{
		{"empty", ``, []string{"the spec is empty"}},
		{"not JSON", `cluster=a:1`, []string{"the spec is not JSON"}},
		{"truncated", `{"cluster":{"worker":["a:1"]}`, []string{"not JSON"}},
		{"trailing garbage", tfSpec(`{"type":"worker","index":0}`) + `}`, []string{"text after its JSON object"}},
		{"two objects", tfSpec(`{"type":"worker","index":0}`) + `{}`, []string{"text after its JSON object"}},
		{"an array", `[1]`, []string{"the spec is a JSON array, want an object"}},
		{"null", `null`, []string{"the spec is null"}},
		{"no cluster", `{"task":{"type":"worker","index":0}}`, []string{`no "cluster"`}},
		{"cluster null", cl(`null`), []string{`"cluster" is null`}},
		{"cluster a list", cl(`["a:1"]`), []string{`"cluster" is a JSON array`}},
		{"cluster empty", cl(`{}`), []string{`"cluster" lists no tasks`}},
		{"unknown role", cl(`{"worker":["a:1"],"workers":["b:1"]}`), []string{`unknown task type "workers"`, "chief, worker, ps or evaluator"}},
		{"empty role", cl(`{"worker":["a:1"],"ps":[]}`), []string{`"ps": the list is empty`}},
		{"null role", cl(`{"worker":null}`), []string{`"worker": the list is empty`}},
		{"role not a list", cl(`{"worker":"a:1"}`), []string{`"worker": want a list of "host:port" strings`}},
		{"address not a string", cl(`{"worker":[2222]}`), []string{`"worker": want a list`}},
		{"no port", cl(`{"worker":["a:1","b"]}`), []string{`worker[1] "b"`, `want "host:port"`}},
		{"empty host", cl(`{"worker":[":1"]}`), []string{`worker[0] ":1"`, "host is empty"}},
		{"port 0", cl(`{"worker":["a:0"]}`), []string{`worker[0] "a:0"`, `port "0" is not in 1..65535`}},
		{"port too large", cl(`{"worker":["a:65536"]}`), []string{`port "65536"`}},
		{"port not a number", cl(`{"worker":["a:http"]}`), []string{`port "http"`}},
		{"port signed", cl(`{"worker":["a:+80"]}`), []string{`port "+80"`}},
		{"duplicate address", cl(`{"chief":["a:1"],"worker":["b:1","a:1"]}`), []string{`worker[1] "a:1": the same address as chief[0]`}},
		{"two chiefs", cl(`{"chief":["a:1","b:1"],"worker":["c:1"]}`), []string{"2 chief tasks", "at most one"}},
		{"chief and master", cl(`{"chief":["a:1"],"master":["b:1"],"worker":["c:1"]}`), []string{"2 chief tasks"}},
		{"nothing to train", `{"cluster":{"ps":["a:1"]},"task":{"type":"ps","index":0}}`, []string{"no chief or worker task"}},
		{"no task", `{"cluster":{"worker":["a:1"]}}`, []string{`no "task"`}},
		{"task a string", `{"cluster":{"worker":["a:1"]},"task":"worker"}`, []string{`"task" is a JSON string`}},
		{"task without type", `{"cluster":{"worker":["a:1"]},"task":{"index":0}}`, []string{`"task" has no "type"`}},
		{"type not a string", `{"cluster":{"worker":["a:1"]},"task":{"type":1,"index":0}}`, []string{`"type" is not a string`}},
		{"task without index", `{"cluster":{"worker":["a:1"]},"task":{"type":"worker"}}`, []string{`"task" has no "index"`}},
		{"index a string", tfSpec(`{"type":"worker","index":"1"}`), []string{`"index" "1" is not an integer`}},
		{"index fractional", tfSpec(`{"type":"worker","index":1.5}`), []string{`"index" 1.5 is not an integer`}},
		{"type not in cluster", tfSpec(`{"type":"ps","index":0}`), []string{`type "ps" is not in "cluster" (which has chief, worker)`}},
		{"unknown type", tfSpec(`{"type":"boss","index":0}`), []string{`type "boss" is not in "cluster"`}},
		{"index negative", tfSpec(`{"type":"worker","index":-1}`), []string{"index -1 is negative"}},
		{"index out of range", tfSpec(`{"type":"worker","index":2}`), []string{`index 2 is out of range: "cluster" has 2 "worker" tasks`}},
		{"chief index 1", tfSpec(`{"type":"chief","index":1}`), []string{`index 1 is out of range: "cluster" has 1 "chief" tasks`}},
		{"unknown top-level key", `{"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":0},"tasks":1}`,
			[]string{`the spec has unknown key "tasks"`, "ignored: environment, rpc_layer, job"}},
		{"unknown task key", `{"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":0,"rank":0}}`,
			[]string{`"task" has unknown key "rank"`}},
		{"too large", tfSpec(`{"type":"worker","index":0}`) + strings.Repeat(" ", maxTFConfig), []string{"larger than 1 MiB"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseTFConfig([]byte(tt.in))
			if err == nil {
				t.Fatalf("parsed %+v, no error", c)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans several lines: %q", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	// Exactly the limit is fine.
	ok := tfSpec(`{"type":"worker","index":0}`)
	if _, err := ParseTFConfig([]byte(ok + strings.Repeat(" ", maxTFConfig-len(ok)))); err != nil {
		t.Errorf("a spec of exactly %d bytes: %v", maxTFConfig, err)
	}
}

// TestDetectTFConfig: a chief and workers are an all-reduce job whose
// chief is rank 0 and serves the rendezvous on its own address.
func TestDetectTFConfig(t *testing.T) {
	spread := `{"cluster":{"chief":["c:2222"],"worker":["w0:2222","w1:2222"],"evaluator":["e:2222"]},"task":`
	workers := `{"cluster":{"worker":["a:5000","a:5001","b:5000"]},"task":{"type":"worker","index":`
	tests := []struct {
		name string
		env  []string
		want want
	}{
		{"chief is rank 0", []string{"TF_CONFIG=" + spread + `{"type":"chief","index":0}}`},
			want{launcher: LauncherTFConfig, size: 3, ls: 1, cs: 3, host: "c", rdv: "c:2222", serve: ":2222",
				token: true, hosts: []string{"c", "w0", "w1"}, hints: []string{"w0", "w1"}}},
		{"worker 1 is rank 2", []string{"TF_CONFIG=" + spread + `{"type":"worker","index":1}}`},
			want{launcher: LauncherTFConfig, rank: 2, size: 3, ls: 1, cr: 2, cs: 3, host: "w1", rdv: "c:2222",
				token: true, hosts: []string{"c", "w0", "w1"}, hints: []string{"c", "w0"}}},
		{"three local tasks", []string{"TF_CONFIG=" + tfSpec(`{"type":"worker","index":1}`)},
			want{launcher: LauncherTFConfig, rank: 2, size: 3, lr: 2, ls: 3, cs: 1, host: "localhost", rdv: "localhost:2222",
				token: true, hosts: []string{"localhost", "localhost", "localhost"}}},
		{"workers only: worker 0 is rank 0", []string{"TF_CONFIG=" + workers + `0}}`},
			want{launcher: LauncherTFConfig, size: 3, ls: 2, cs: 2, host: "a", rdv: "a:5000", serve: ":5000",
				token: true, hosts: []string{"a", "a", "b"}, hints: []string{"b"}}},
		{"workers only: worker 2", []string{"TF_CONFIG=" + workers + `2}}`},
			want{launcher: LauncherTFConfig, rank: 2, size: 3, ls: 1, cr: 1, cs: 2, host: "b", rdv: "a:5000",
				token: true, hosts: []string{"a", "a", "b"}, hints: []string{"a"}}},
		{"one worker alone", []string{`TF_CONFIG={"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":0}}`},
			want{launcher: LauncherTFConfig, size: 1, ls: 1, cs: 1, host: "a", hosts: []string{"a"}}},
		{"rendezvous port and secret", []string{"TF_CONFIG=" + spread + `{"type":"worker","index":0}}`,
			"GOROVOD_RENDEZVOUS_PORT=29999", "GOROVOD_SECRET=" + strings.Repeat("ab", 32)},
			want{launcher: LauncherTFConfig, rank: 1, size: 3, ls: 1, cr: 1, cs: 3, host: "w0", rdv: "c:29999",
				hosts: []string{"c", "w0", "w1"}, hints: []string{"c", "w1"}}},
		{"GOROVOD_CLUSTER in TF_CONFIG's shape", []string{"GOROVOD_CLUSTER=" + spread + `{"type":"worker","index":0}}`},
			want{launcher: LauncherCluster, rank: 1, size: 3, ls: 1, cr: 1, cs: 3, host: "w0", rdv: "c:2222",
				token: true, hosts: []string{"c", "w0", "w1"}, hints: []string{"c", "w1"}}},
		{"GOROVOD_CLUSTER wins over TF_CONFIG", []string{`GOROVOD_CLUSTER={"hosts":["x","y"],"port":7000,"index":1}`,
			"TF_CONFIG=" + spread + `{"type":"chief","index":0}}`},
			want{launcher: LauncherCluster, rank: 1, size: 2, ls: 1, cr: 1, cs: 2, host: "y", rdv: "x:7000",
				token: true, hosts: []string{"x", "y"}, hints: []string{"x"}}},
		{"torchrun wins over TF_CONFIG", []string{"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=1000",
			"TF_CONFIG=" + spread + `{"type":"chief","index":0}}`},
			want{launcher: LauncherTorchrun, rank: 1, size: 2, ls: 1, cs: 1, host: "thishost", rdv: "m:1000", derive: true, token: true}},
		{"slurm wins over TF_CONFIG", []string{"SLURM_JOB_ID=7", "SLURM_STEP_ID=0", "SLURM_STEP_NODELIST=n1",
			"SLURM_STEP_TASKS_PER_NODE=1", "SLURM_NTASKS=1", "SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=0",
			"SLURMD_NODENAME=n1", "TF_CONFIG=" + spread + `{"type":"chief","index":0}}`},
			want{launcher: LauncherSlurm, size: 1, ls: 1, cs: 1, host: "n1", hosts: []string{"n1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, plan, err := detectIn(tt.env...)
			if err != nil {
				t.Fatal(err)
			}
			checkDetected(t, env, plan, tt.want)
		})
	}
	// Every task of one spec derives the same token; another spec another.
	secret := func(tf string) string {
		env, _, err := detectIn("TF_CONFIG=" + tf)
		if err != nil {
			t.Fatal(err)
		}
		return string(hexOf(env.Secret))
	}
	if secret(spread+`{"type":"chief","index":0}}`) != secret(spread+`{"type":"worker","index":1}}`) {
		t.Error("two tasks of one spec derived different tokens")
	}
	if secret(spread+`{"type":"chief","index":0}}`) == secret(tfSpec(`{"type":"chief","index":0}`)) {
		t.Error("two specs derived the same token")
	}
}

// TestDetectTFConfigErrors: what cannot join an all-reduce job fails before
// anything starts, naming the launcher, the variable and what is wrong.
func TestDetectTFConfigErrors(t *testing.T) {
	withPS := `{"cluster":{"chief":["c:1"],"worker":["w:1"],"ps":["p:1","q:1"]},"task":`
	eval := `{"cluster":{"chief":["c:1"],"worker":["w:1"],"evaluator":["e:1"]},"task":{"type":"evaluator","index":0}}`
	big := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(big, []byte(tfSpec(`{"type":"chief","index":0}`)+strings.Repeat(" ", maxClusterSpec)), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  []string
		want []string
	}{
		{"ps tasks: a worker", []string{"TF_CONFIG=" + withPS + `{"type":"worker","index":0}}`},
			[]string{"tfconfig", "TF_CONFIG=", `"ps" tasks (2)`, "parameter-server job", "ps.Run"}},
		{"ps tasks: a ps", []string{"TF_CONFIG=" + withPS + `{"type":"ps","index":1}}`},
			[]string{"parameter-server job", "ps.Run"}},
		{"the evaluator", []string{"TF_CONFIG=" + eval},
			[]string{"tfconfig", "this task is the evaluator", "does not join the all-reduce job"}},
		{"malformed", []string{`TF_CONFIG={"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":3}}`},
			[]string{"tfconfig", "TF_CONFIG=", "index 3 is out of range"}},
		{"not JSON", []string{"TF_CONFIG=worker:0"}, []string{"tfconfig", "TF_CONFIG=worker:0", "not JSON"}},
		{"empty object", []string{"TF_CONFIG={}"}, []string{"tfconfig", `no "cluster"`}},
		{"GOROVOD_CLUSTER with ps", []string{"GOROVOD_CLUSTER=" + withPS + `{"type":"chief","index":0}}`},
			[]string{"cluster", "GOROVOD_CLUSTER=", "parameter-server job"}},
		{"GOROVOD_CLUSTER malformed", []string{`GOROVOD_CLUSTER={"cluster":{"worker":["a:1"]},"task":{"type":"chief","index":0}}`},
			[]string{"cluster", `type "chief" is not in "cluster"`}},
		{"GOROVOD_CLUSTER in TF shape with an index", []string{"GOROVOD_CLUSTER=" + tfSpec(`{"type":"chief","index":0}`),
			"GOROVOD_CLUSTER_INDEX=1"}, []string{"GOROVOD_CLUSTER_INDEX is set", `"task" says which task`}},
		{"GOROVOD_CLUSTER file in TF shape too large", []string{"GOROVOD_CLUSTER=@" + big}, []string{"larger than 1 MiB"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkDetectError(t, tt.env, tt.want)
		})
	}
}

// TestTFConfigShape: GOROVOD_CLUSTER is read as TF_CONFIG when it is an
// object with "cluster" or "task", and as a ClusterSpec otherwise.
func TestTFConfigShape(t *testing.T) {
	for in, want := range map[string]bool{
		`{"cluster":{}}`:              true,
		`{"task":{}}`:                 true,
		`{"hosts":["a"],"index":0}`:   false,
		`{"hosts":["a"],"cluster":1}`: true,
		`not json`:                    false,
		`["cluster"]`:                 false,
	} {
		if got := isTFConfigShape([]byte(in)); got != want {
			t.Errorf("isTFConfigShape(%s) = %v, want %v", in, got, want)
		}
	}
}
