package jobenv

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/internal/auth"
)

// envOf returns a getenv over kv ("NAME=value" entries).
func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for _, e := range kv {
		k, v, _ := strings.Cut(e, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

// detectIn runs the detector on kv, on host "thishost" with parent 4242.
func detectIn(kv ...string) (Env, JoinPlan, error) {
	return detector{getenv: envOf(kv...), hostname: "thishost", ppid: 4242}.detect()
}

// want is what a detection should find; fields left zero are not checked
// unless noted.
type want struct {
	launcher                       string
	rank, size, lr, ls, cr, cs     int
	host, rdv, serve               string
	derive                         bool
	token                          bool // the secret is the job token (and a note says so)
	hosts                          []string
	hints                          []string
	fusion                         int64
	hostsUnchecked, hintsUnchecked bool
	rdvUnchecked, serveUnchecked   bool
}

func TestDetectLaunchers(t *testing.T) {
	slurm := []string{"SLURM_JOB_ID=77", "SLURM_STEP_ID=3", "SLURM_NTASKS=4", "SLURM_STEP_NUM_TASKS=4",
		"SLURM_STEP_NODELIST=node[1-2]", "SLURM_STEP_TASKS_PER_NODE=2(x2)", "SLURMD_NODENAME=node2",
		"SLURM_PROCID=3", "SLURM_LOCALID=1", "SLURM_NODEID=1"}
	slurmPort := itoa(DerivedPort("slurm-77.3"))
	ompi := []string{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=0",
		"OMPI_COMM_WORLD_LOCAL_SIZE=4", "OMPI_MCA_ess_base_jobid=99"}
	tests := []struct {
		name string
		env  []string
		want want
	}{
		{"alone", nil, want{size: 1, ls: 1, cs: 1, rdv: ""}},
		{"gorun", []string{"GOROVOD_RANK=1", "GOROVOD_SIZE=2", "GOROVOD_LOCAL_RANK=1", "GOROVOD_LOCAL_SIZE=2",
			"GOROVOD_CROSS_RANK=0", "GOROVOD_CROSS_SIZE=1", "GOROVOD_RENDEZVOUS_ADDR=127.0.0.1:5000",
			"GOROVOD_SECRET=" + strings.Repeat("ab", 32), "SLURM_PROCID=0", "SLURM_STEP_ID=1"},
			want{launcher: LauncherGorun, rank: 1, size: 2, lr: 1, ls: 2, cs: 1, rdv: "127.0.0.1:5000"}},
		{"slurm rank 3 of 2x2", slurm, want{launcher: LauncherSlurm, rank: 3, size: 4, lr: 1, ls: 2, cr: 1, cs: 2,
			host: "node2", rdv: "node1:" + slurmPort, token: true,
			hosts: []string{"node1", "node1", "node2", "node2"}, hints: []string{"node1"}}},
		{"slurm rank 0 serves", with(slurm, "SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=0", "SLURMD_NODENAME=node1"),
			want{launcher: LauncherSlurm, size: 4, ls: 2, cs: 2, host: "node1", rdv: "node1:" + slurmPort,
				serve: ":" + slurmPort, token: true, hostsUnchecked: true, hints: []string{"node2"}}},
		{"slurm odd 2,1", with(slurm, "SLURM_NTASKS=3", "SLURM_STEP_NUM_TASKS=3", "SLURM_STEP_TASKS_PER_NODE=2,1",
			"SLURM_PROCID=2", "SLURM_LOCALID=0", "SLURM_NODEID=1"),
			want{launcher: LauncherSlurm, rank: 2, size: 3, ls: 1, cr: 1, cs: 2, host: "node2", rdv: "node1:" + slurmPort,
				token: true, hosts: []string{"node1", "node1", "node2"}, hintsUnchecked: true}},
		{"slurm cyclic: no planned hosts", with(slurm, "SLURM_DISTRIBUTION=cyclic"),
			want{launcher: LauncherSlurm, rank: 3, size: 4, lr: 1, ls: 2, cr: 1, cs: 2, host: "node2",
				rdvUnchecked: true, token: true, hintsUnchecked: true}},
		{"slurm with pmi2 vars stays slurm", with(slurm, "PMI_RANK=3", "PMI_SIZE=4"),
			want{launcher: LauncherSlurm, rank: 3, size: 4, lr: 1, ls: 2, cr: 1, cs: 2, host: "node2",
				rdvUnchecked: true, token: true, hostsUnchecked: true, hintsUnchecked: true}},
		{"slurm knobs and port", with(slurm, "GOROVOD_FUSION_THRESHOLD=1024", "GOROVOD_RENDEZVOUS_PORT=29999"),
			want{launcher: LauncherSlurm, rank: 3, size: 4, lr: 1, ls: 2, cr: 1, cs: 2, host: "node2", rdv: "node1:29999",
				token: true, fusion: 1024, hostsUnchecked: true, hintsUnchecked: true}},
		{"openmpi one host", ompi, want{launcher: LauncherOpenMPI, size: 4, ls: 4, cs: 1, host: "thishost",
			rdv: "127.0.0.1:" + itoa(DerivedPort("99")), serve: ":" + itoa(DerivedPort("99")), token: true}},
		{"openmpi inside an sbatch script", append(with(ompi, "OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_LOCAL_RANK=2"),
			"SLURM_JOB_ID=5", "SLURM_PROCID=0", "SLURM_STEP_ID=0", "SLURM_NTASKS=4"),
			want{launcher: LauncherOpenMPI, rank: 2, size: 4, lr: 2, ls: 4, cs: 1, host: "thishost",
				rdv: "127.0.0.1:" + itoa(DerivedPort("99")), token: true}},
		{"openmpi across hosts", with(ompi, "OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_LOCAL_RANK=1",
			"OMPI_COMM_WORLD_LOCAL_SIZE=2", "GOROVOD_RENDEZVOUS_ADDR=head:7000"),
			want{launcher: LauncherOpenMPI, rank: 3, size: 4, lr: 1, ls: 2, cs: 1, host: "thishost",
				rdv: "head:7000", derive: true, token: true}},
		{"mpich one host", []string{"PMI_RANK=1", "PMI_SIZE=3", "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=3"},
			want{launcher: LauncherMPICH, rank: 1, size: 3, lr: 1, ls: 3, cs: 1, host: "thishost",
				rdv: "127.0.0.1:" + itoa(DerivedPort("hydra-proxy-4242")), token: true}},
		{"mpich without local ranks", []string{"PMI_RANK=0", "PMI_SIZE=2", "GOROVOD_RENDEZVOUS_ADDR=10.1.1.1:5555"},
			want{launcher: LauncherMPICH, size: 2, ls: 1, cs: 1, host: "thishost", rdv: "10.1.1.1:5555",
				serve: ":5555", derive: true, token: true}},
		{"torchrun style", []string{"RANK=2", "WORLD_SIZE=4", "MASTER_ADDR=master", "MASTER_PORT=29500"},
			want{launcher: LauncherTorchrun, rank: 2, size: 4, ls: 1, cs: 1, host: "thishost",
				rdv: "master:29500", derive: true, token: true}},
		{"torchrun agent holds MASTER_PORT", []string{"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=2",
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500", "TORCHELASTIC_RUN_ID=abc"},
			want{launcher: LauncherTorchrun, size: 2, ls: 2, cs: 1, host: "thishost",
				rdv: "127.0.0.1:29501", serve: ":29501", derive: true, token: true}},
		{"torchrun with a secret", []string{"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=1000",
			"GOROVOD_SECRET=" + strings.Repeat("0f", 32)},
			want{launcher: LauncherTorchrun, rank: 1, size: 2, ls: 1, cs: 1, host: "thishost", rdv: "m:1000", derive: true}},
		{"cluster spec", []string{`GOROVOD_CLUSTER={"hosts":["a:2","b:2"],"port":4000,"index":3}`},
			want{launcher: LauncherCluster, rank: 3, size: 4, lr: 1, ls: 2, cr: 1, cs: 2, host: "b", rdv: "a:4000",
				token: true, hosts: []string{"a", "a", "b", "b"}, hints: []string{"a"}}},
		{"cluster index from the environment", []string{`GOROVOD_CLUSTER={"hosts":["a","b"]}`, "GOROVOD_CLUSTER_INDEX=0"},
			want{launcher: LauncherCluster, size: 2, ls: 1, cs: 2, host: "a",
				rdv: "a:" + itoa(DerivedPort("cluster:a:1,b:1")), serveUnchecked: true, token: true,
				hosts: []string{"a", "b"}, hints: []string{"b"}}},
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
}

// checkDetected compares a detection with w.
func checkDetected(t *testing.T, env Env, plan JoinPlan, w want) {
	t.Helper()
	got := []int{env.Rank, env.Size, env.LocalRank, env.LocalSize, env.CrossRank, env.CrossSize}
	exp := []int{w.rank, w.size, w.lr, w.ls, w.cr, w.cs}
	if !equalSlices(got, exp) {
		t.Errorf("rank, size, local, cross = %v, want %v", got, exp)
	}
	check := func(what string, got, want any) {
		t.Helper()
		if !equalAny(got, want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	check("launcher", plan.Launcher, w.launcher)
	check("host", env.Hostname, w.host)
	check("derive", plan.DeriveTopology, w.derive)
	if !w.rdvUnchecked {
		check("rendezvous", env.RendezvousAddr, w.rdv)
	}
	if !w.serveUnchecked {
		check("serve", plan.ServeAddr, w.serve)
	}
	if !w.hostsUnchecked {
		check("hosts", strings.Join(plan.Hosts, ","), strings.Join(w.hosts, ","))
	}
	if !w.hintsUnchecked {
		check("route hints", strings.Join(plan.RouteHints, ","), strings.Join(w.hints, ","))
	}
	if w.fusion != 0 {
		check("fusion threshold", env.FusionThreshold, w.fusion)
	}
	if w.token {
		if len(plan.Notes) != 1 || !strings.Contains(plan.Notes[0], EnvSecretFile) {
			t.Errorf("notes = %q, want one naming %s", plan.Notes, EnvSecretFile)
		}
		if len(env.Secret) != auth.SecretSize {
			t.Errorf("secret is %d bytes", len(env.Secret))
		}
	} else if len(plan.Notes) != 0 {
		t.Errorf("notes = %q, want none", plan.Notes)
	}
}

// TestDetectTokenIsPerJob checks that every rank of a job derives the same
// token, and another job another one.
func TestDetectTokenIsPerJob(t *testing.T) {
	job := func(id, rank string) []byte {
		env, _, err := detectIn("OMPI_COMM_WORLD_RANK="+rank, "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK="+rank,
			"OMPI_COMM_WORLD_LOCAL_SIZE=2", "OMPI_MCA_ess_base_jobid="+id)
		if err != nil {
			t.Fatal(err)
		}
		return env.Secret
	}
	if !bytes.Equal(job("1", "0"), job("1", "1")) {
		t.Error("two ranks of one job derived different tokens")
	}
	if bytes.Equal(job("1", "0"), job("2", "0")) {
		t.Error("two jobs derived the same token")
	}
}

func TestDetectErrors(t *testing.T) {
	slurm := []string{"SLURM_JOB_ID=77", "SLURM_STEP_ID=3", "SLURM_NTASKS=4", "SLURM_STEP_NODELIST=node[1-2]",
		"SLURM_STEP_TASKS_PER_NODE=2(x2)", "SLURM_PROCID=3", "SLURM_LOCALID=1", "SLURM_NODEID=1"}
	tests := []struct {
		name string
		env  []string
		want []string // substrings of the error
	}{
		{"world size without rank", []string{"WORLD_SIZE=4"}, []string{"torchrun", "WORLD_SIZE=4", "not one of them"}},
		{"slurm tasks outside a step", []string{"SLURM_JOB_ID=5", "SLURM_NTASKS=4", "SLURM_PROCID=0"},
			[]string{"slurm", "SLURM_NTASKS=4", "srun"}},
		{"openmpi size without rank", []string{"OMPI_COMM_WORLD_SIZE=2"}, []string{"openmpi", "OMPI_COMM_WORLD_RANK is not set"}},
		{"openmpi across hosts without address", []string{"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4",
			"OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2"},
			[]string{"openmpi", "OMPI_COMM_WORLD_SIZE=4", "GOROVOD_RENDEZVOUS_ADDR", "-x"}},
		{"bad node list", with(slurm, "SLURM_STEP_NODELIST=node[1-"), []string{"slurm", "SLURM_STEP_NODELIST", "node[1-"}},
		{"node list and counts disagree", with(slurm, "SLURM_STEP_TASKS_PER_NODE=4"), []string{"slurm", "2 nodes", "1"}},
		{"counts do not add up", with(slurm, "SLURM_STEP_TASKS_PER_NODE=2,1"), []string{"slurm", "add up to 3"}},
		{"rank 0 off the first node", with(slurm, "SLURM_PROCID=0"), []string{"rank 0 runs on", GOROVOD("RENDEZVOUS_ADDR")}},
		{"rank beyond size", []string{"RANK=4", "WORLD_SIZE=4", "MASTER_ADDR=m", "MASTER_PORT=1"}, []string{"rank 4 is not below"}},
		{"master addr without port", []string{"RANK=1", "WORLD_SIZE=4", "MASTER_ADDR=m"}, []string{"MASTER_PORT"}},
		{"no master", []string{"RANK=1", "WORLD_SIZE=4"}, []string{"torchrun", GOROVOD("RENDEZVOUS_ADDR")}},
		{"rendezvous address alone", []string{"GOROVOD_RENDEZVOUS_ADDR=h:1"}, []string{"GOROVOD_RENDEZVOUS_ADDR is set", "no launcher"}},
		{"bad rendezvous port", with(slurm, "GOROVOD_RENDEZVOUS_PORT=http"), []string{"GOROVOD_RENDEZVOUS_PORT", `"http"`}},
		{"bad secret", with(slurm, "GOROVOD_SECRET=zz"), []string{"GOROVOD_SECRET", "64 hexadecimal"}},
		{"cluster without index", []string{`GOROVOD_CLUSTER={"hosts":["a","b"]}`}, []string{"cluster", "index"}},
		{"cluster index out of range", []string{`GOROVOD_CLUSTER={"hosts":["a","b"]}`, "GOROVOD_CLUSTER_INDEX=2"},
			[]string{"index 2 is not in [0, 2)"}},
		{"cluster unknown field", []string{`GOROVOD_CLUSTER={"hosts":["a"],"rank":0}`}, []string{"unknown field"}},
		{"cluster missing file", []string{"GOROVOD_CLUSTER=@/nonexistent/spec.json"}, []string{"/nonexistent/spec.json"}},
		{"cluster spec endless", []string{"GOROVOD_CLUSTER=@/dev/zero"}, []string{"/dev/zero: larger than 1 MiB, the most a cluster spec may hold"}},
		{"cluster bad host", []string{`GOROVOD_CLUSTER={"hosts":["a:x"]}`, "GOROVOD_CLUSTER_INDEX=0"}, []string{"a:x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkDetectError(t, tt.env, tt.want)
		})
	}
}

// GOROVOD names a variable of the contract.
func GOROVOD(s string) string { return "GOROVOD_" + s }

func TestDetectSecretFile(t *testing.T) {
	dir := t.TempDir()
	secret := strings.Repeat("5a", 32)
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", secret+"\n", 0o600)
	base := []string{"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=1000"}
	env, plan, err := detectIn(append(base, "GOROVOD_SECRET_FILE="+good)...)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(hexOf(env.Secret)); got != secret || len(plan.Notes) != 0 {
		t.Errorf("secret %s, notes %q; want the file's and no note", got, plan.Notes)
	}
	// White space may pad the file up to its limit, 4 KiB.
	full := write("full", secret+strings.Repeat("\n", maxSecretFile-len(secret)), 0o600)
	if b, err := ReadSecretFile(full); err != nil || string(hexOf(b)) != secret {
		t.Errorf("a secret file of exactly %d bytes: %x, %v", maxSecretFile, b, err)
	}
	for name, c := range map[string]struct {
		path string
		want string
	}{
		"world readable": {write("open", secret, 0o644), "mode 0644"},
		"group readable": {write("group", secret, 0o640), "chmod 600"},
		"short":          {write("short", "abcd", 0o600), "64 hexadecimal digits"},
		"missing":        {filepath.Join(dir, "none"), "no such file"},
		"a directory":    {dir, "not a regular file"},
		"too large":      {write("large", secret+strings.Repeat(" ", maxSecretFile+1-len(secret)), 0o600), "larger than 4 KiB"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := detectIn(append(base, "GOROVOD_SECRET_FILE="+c.path)...)
			if err == nil || !errors.Is(err, ErrLauncher) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want ErrLauncher mentioning %q", err, c.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Error("the error shows the secret")
			}
		})
	}
}

// with returns base with the "NAME=value" entries of set replacing (or
// adding) the variables they name.
func with(base []string, set ...string) []string {
	out := append([]string(nil), base...)
	for _, kv := range set {
		name, _, _ := strings.Cut(kv, "=")
		found := false
		for i, e := range out {
			if n, _, _ := strings.Cut(e, "="); n == name {
				out[i], found = kv, true
			}
		}
		if !found {
			out = append(out, kv)
		}
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }

func hexOf(b []byte) []byte { return []byte(hex.EncodeToString(b)) }

func equalSlices[T comparable](a, b []T) bool { return slices.Equal(a, b) }

func equalAny(a, b any) bool { return a == b }

// checkDetectError checks that Detect in env fails with one line that
// wraps ErrLauncher and mentions every string of want.
func checkDetectError(t *testing.T, env, want []string) {
	t.Helper()
	_, _, err := detectIn(env...)
	if err == nil {
		t.Fatal("no error")
	}
	if !errors.Is(err, ErrLauncher) {
		t.Errorf("%v does not wrap ErrLauncher", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error spans several lines: %q", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}
