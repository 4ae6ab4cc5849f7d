package kubernetes

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/internal/auth"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/kernels"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Names and paths the manifests and the image agree on.
const (
	secretName      = "gorovod-secret"    // kubectl create secret generic gorovod-secret ...
	mpiHostfile     = "/etc/mpi/hostfile" // where the MPI Operator mounts the hostfile
	completionIndex = "batch.kubernetes.io/job-completion-index"
	jobNameLabel    = "batch.kubernetes.io/job-name"
)

// rankEnv is what jobenv.Detect made of one rank's environment.
type rankEnv struct {
	vars map[string]string // the environment it was given
	env  jobenv.Env
	plan jobenv.JoinPlan
}

// getenv returns a getenv over m.
func getenv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// writeSecret writes a job secret file as GOROVOD_SECRET_FILE wants it
// (64 hex digits, mode 0400) and returns its path and the secret.
func writeSecret(t *testing.T) (string, []byte) {
	t.Helper()
	secret := make([]byte, auth.SecretSize)
	rand.Read(secret)
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte(hex.EncodeToString(secret)+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	return file, secret
}

// checkSecretFile checks how a pod gets the job secret to file, the
// GOROVOD_SECRET_FILE of its ranks: the Secret is a volume with
// defaultMode 0400, which an init container copies with mode 0400 to a
// memory-backed emptyDir that the container c mounts, at file.
//
// The copy is needed because the pods run as a non-root user: fsGroup lets
// that user read the Secret volume but also makes its files group-readable
// (Kubernetes adds 0440 whatever defaultMode says, kubernetes#57923), and
// jobenv.ReadSecretFile refuses a file that others may read.
func checkSecretFile(t *testing.T, spec podSpec, c container, file string) {
	t.Helper()
	sc := spec.SecurityContext
	if sc.RunAsUser == nil || *sc.RunAsUser == 0 || sc.FSGroup == nil {
		t.Errorf("pod security context: want a non-root runAsUser and an fsGroup (to read the secret volume)")
	}
	var secretVol string
	for _, v := range spec.Volumes {
		if v.Secret == nil {
			continue
		}
		secretVol = v.Name
		if v.Secret.SecretName != secretName {
			t.Errorf("secret volume %s: secretName %q, want %q", v.Name, v.Secret.SecretName, secretName)
		}
		if m := v.Secret.DefaultMode; m == nil {
			t.Errorf("secret volume %s: no defaultMode (Kubernetes' default is 0644), want 0400", v.Name)
		} else if *m != 0o400 {
			t.Errorf("secret volume %s: defaultMode %#o, want 0400", v.Name, *m)
		}
	}
	if secretVol == "" {
		t.Fatalf("the pod has no secret volume")
	}
	var copier *container
	for i, ic := range spec.InitContainers {
		if _, ok := mountOf(ic, secretVol); ok {
			copier = &spec.InitContainers[i]
		}
	}
	if copier == nil {
		t.Fatalf("no init container mounts the secret volume %s", secretVol)
	}
	argv := copier.argv()
	if len(argv) != 5 || argv[0] != "install" || argv[1] != "-m" || argv[2] != "0400" {
		t.Fatalf("init container %s: command %q, want install -m 0400 SRC DST", copier.Name, argv)
	}
	src, dst := argv[3], argv[4]
	if m, _ := mountOf(*copier, secretVol); !within(src, m.MountPath) {
		t.Errorf("init container %s copies %s, not a file of the secret volume at %s", copier.Name, src, m.MountPath)
	}
	from, ok := mountHolding(*copier, dst)
	if !ok || from.ReadOnly {
		t.Fatalf("init container %s: no writable mount holds %s", copier.Name, dst)
	}
	if v, _ := spec.volumeNamed(from.Name); v.EmptyDir == nil || v.EmptyDir.Medium != "Memory" {
		t.Errorf("volume %s holding the secret's copy: want an emptyDir with medium Memory", from.Name)
	}
	to, ok := mountOf(c, from.Name)
	if !ok {
		t.Fatalf("container %s does not mount volume %s, where the secret's copy is", c.Name, from.Name)
	}
	if want := filepath.Join(to.MountPath, strings.TrimPrefix(dst, from.MountPath)); file != want {
		t.Errorf("GOROVOD_SECRET_FILE=%s, but the secret is copied to %s", file, want)
	}
}

// checkResources checks that c requests CPU and memory.
func checkResources(t *testing.T, c container) {
	t.Helper()
	if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" {
		t.Errorf("container %s: want CPU and memory requests, have %v", c.Name, c.Resources.Requests)
	}
}

// indexedJob reads indexed-job.yaml: its Service and Job.
func indexedJob(t *testing.T) (service, job) {
	t.Helper()
	objs := readManifest(t, "indexed-job.yaml")
	if len(objs) != 2 {
		t.Fatalf("indexed-job.yaml has %d objects, want a Service and a Job", len(objs))
	}
	return only[service](t, objs, "v1", "Service"), only[job](t, objs, "batch/v1", "Job")
}

// indexedPod returns the metadata of pod i of the Indexed Job j as the Job
// controller makes it.
func indexedPod(j job, i int) podMeta {
	idx := strconv.Itoa(i)
	labels := map[string]string{jobNameLabel: j.Metadata.Name, "job-name": j.Metadata.Name, completionIndex: idx}
	maps.Copy(labels, j.Spec.Template.Metadata.Labels)
	return podMeta{name: j.Metadata.Name + "-" + idx + "-x7k2p", namespace: "default", labels: labels,
		annotations: map[string]string{completionIndex: idx}}
}

// TestIndexedJobManifest checks the structure of indexed-job.yaml: an
// Indexed Job of as many pods, all at once, as WORLD_SIZE says, never
// restarted, in the DNS domain of a headless Service that selects them, with
// MASTER_ADDR naming pod 0 and the secret coming from a file.
func TestIndexedJobManifest(t *testing.T) {
	svc, j := indexedJob(t)
	spec := j.Spec.Template.Spec
	if j.Spec.CompletionMode != "Indexed" {
		t.Errorf("completionMode %q, want Indexed", j.Spec.CompletionMode)
	}
	if j.Spec.Completions == nil || j.Spec.Parallelism == nil || *j.Spec.Completions != *j.Spec.Parallelism {
		t.Fatalf("completions %v and parallelism %v: want both set and equal", j.Spec.Completions, j.Spec.Parallelism)
	}
	if j.Spec.BackoffLimit == nil || *j.Spec.BackoffLimit != 0 || spec.RestartPolicy != "Never" {
		t.Errorf("backoffLimit %v, restartPolicy %q: want 0 and Never (a lone restarted rank cannot rejoin)", j.Spec.BackoffLimit, spec.RestartPolicy)
	}
	if svc.Spec.ClusterIP != "None" {
		t.Errorf("Service clusterIP %q, want None (headless)", svc.Spec.ClusterIP)
	}
	if spec.Subdomain != svc.Metadata.Name {
		t.Errorf("subdomain %q, want the Service's name %q", spec.Subdomain, svc.Metadata.Name)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	checkResources(t, c)
	n := *j.Spec.Completions
	for i := range n {
		pod := indexedPod(j, i)
		for k, v := range svc.Spec.Selector {
			if pod.labels[k] != v {
				t.Errorf("the Service selects %s=%s, pod %d has %s=%q", k, v, i, k, pod.labels[k])
			}
		}
		env, err := podEnv(c, pod)
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		if env["RANK"] != strconv.Itoa(i) || env["WORLD_SIZE"] != strconv.Itoa(n) {
			t.Errorf("pod %d: RANK=%q WORLD_SIZE=%q, want %d and %d", i, env["RANK"], env["WORLD_SIZE"], i, n)
		}
		// Pod 0 of the Job is host <job>-0 in the Service's subdomain.
		if want := j.Metadata.Name + "-0." + svc.Metadata.Name; env["MASTER_ADDR"] != want {
			t.Errorf("pod %d: MASTER_ADDR=%q, want %q", i, env["MASTER_ADDR"], want)
		}
		if p, err := strconv.Atoi(env["MASTER_PORT"]); err != nil || p <= 0 || p >= 1<<16 {
			t.Errorf("pod %d: MASTER_PORT=%q", i, env["MASTER_PORT"])
		}
		if i == 0 {
			checkSecretFile(t, spec, c, env[jobenv.EnvSecretFile])
		}
	}
}

// indexedJobRanks returns what jobenv.Detect makes of the environment of
// each pod of the Indexed Job, with GOROVOD_SECRET_FILE pointing at a
// secret written here (the manifest's path exists only in the pod).
func indexedJobRanks(t *testing.T) (j job, svc service, ranks []rankEnv, secret []byte) {
	t.Helper()
	svc, j = indexedJob(t)
	if j.Spec.Completions == nil || len(j.Spec.Template.Spec.Containers) == 0 {
		t.Fatal("the Job has no completions or no container")
	}
	file, secret := writeSecret(t)
	for i := range *j.Spec.Completions {
		env, err := podEnv(j.Spec.Template.Spec.Containers[0], indexedPod(j, i))
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		env[jobenv.EnvSecretFile] = file
		we, plan, err := jobenv.Detect(getenv(env))
		if err != nil {
			t.Fatalf("pod %d: jobenv.Detect: %v", i, err)
		}
		ranks = append(ranks, rankEnv{env, we, plan})
	}
	return j, svc, ranks, secret
}

// TestIndexedJobDetect: every pod of the Indexed Job is the rank of its
// index, a torchrun-style rank that dials pod 0, and only rank 0 serves the
// rendezvous.
func TestIndexedJobDetect(t *testing.T) {
	j, svc, ranks, secret := indexedJobRanks(t)
	port := ranks[0].vars["MASTER_PORT"]
	wantAddr := j.Metadata.Name + "-0." + svc.Metadata.Name + ":" + port
	for i, r := range ranks {
		if r.env.Rank != i || r.env.Size != len(ranks) {
			t.Errorf("pod %d: rank %d of %d, want %d of %d", i, r.env.Rank, r.env.Size, i, len(ranks))
		}
		if r.plan.Launcher != jobenv.LauncherTorchrun {
			t.Errorf("pod %d: launcher %q, want %q", i, r.plan.Launcher, jobenv.LauncherTorchrun)
		}
		if r.env.RendezvousAddr != wantAddr {
			t.Errorf("pod %d: rendezvous %q, want %q", i, r.env.RendezvousAddr, wantAddr)
		}
		if want := map[bool]string{true: ":" + port}[i == 0]; r.plan.ServeAddr != want {
			t.Errorf("pod %d: serves the rendezvous on %q, want %q", i, r.plan.ServeAddr, want)
		}
		if !r.plan.DeriveTopology {
			t.Errorf("pod %d: want local ranks derived from the hosts that register", i)
		}
		if !bytes.Equal(r.env.Secret, secret) || len(r.plan.Notes) != 0 {
			t.Errorf("pod %d: the secret is not the one in GOROVOD_SECRET_FILE (notes: %q)", i, r.plan.Notes)
		}
		if r.env.StartTimeout < time.Minute {
			t.Errorf("pod %d: start timeout %v: pods may start minutes apart", i, r.env.StartTimeout)
		}
	}
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestIndexedJobJoin starts the Indexed Job's ranks in process, each as
// jobenv.Detect read its pod's environment, and all-reduces across them.
func TestIndexedJobJoin(t *testing.T) {
	_, _, ranks, _ := indexedJobRanks(t)
	n := len(ranks)
	// Pod 0's DNS name (<job>-0.<service>) resolves only inside the
	// cluster: here rank 0 serves on a free port and every rank dials it
	// on the loopback address.
	port := strconv.Itoa(freePort(t))
	rts := make([]*hvd.Runtime, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, r := range ranks {
		cfg, err := hvd.ConfigFromEnv(getenv(r.vars))
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		cfg.RendezvousAddr = net.JoinHostPort("127.0.0.1", port)
		if cfg.Plan.ServeAddr != "" {
			cfg.Plan.ServeAddr = ":" + port
		}
		cfg.StartTimeout = 20 * time.Second
		wg.Go(func() { rts[i], errs[i] = hvd.NewRuntime(context.Background(), cfg) })
	}
	wg.Wait()
	defer func() {
		for i, rt := range rts {
			if rt == nil {
				continue
			}
			if err := rt.Shutdown(); err != nil {
				t.Errorf("rank %d: shutdown: %v", i, err)
			}
		}
	}()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, rt := range rts {
		wg.Go(func() {
			errs[i] = func() error {
				if rt.Rank() != i || rt.Size() != n || rt.Launcher() != jobenv.LauncherTorchrun {
					return fmt.Errorf("rank %d of %d from %q", rt.Rank(), rt.Size(), rt.Launcher())
				}
				x := hvd.NewTensor("x", []float32{float32(i + 1)})
				if err := rt.Allreduce(ctx, x, kernels.Sum, hvd.ReduceOptions{}); err != nil {
					return err
				}
				if got, want := hvd.Values[float32](x)[0], float32(n*(n+1)/2); got != want {
					return fmt.Errorf("sum %v, want %v", got, want)
				}
				return nil
			}()
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", i, err)
		}
	}
}

// mpiJobParts reads mpijob.yaml: the MPIJob, its launcher's and its
// workers' containers, and the launcher's mpirun command.
func mpiJobParts(t *testing.T) (mj mpiJob, launcher, worker container, cmd mpirunCmd) {
	t.Helper()
	objs := readManifest(t, "mpijob.yaml")
	if len(objs) != 1 {
		t.Fatalf("mpijob.yaml has %d objects, want an MPIJob", len(objs))
	}
	mj = only[mpiJob](t, objs, "kubeflow.org/v2beta1", "MPIJob")
	for _, role := range []string{"Launcher", "Worker"} {
		r, ok := mj.Spec.MPIReplicaSpecs[role]
		if !ok || r.Replicas == nil || len(r.Template.Spec.Containers) == 0 {
			t.Fatalf("mpiReplicaSpecs.%s: want replicas and a container", role)
		}
	}
	launcher = mj.Spec.MPIReplicaSpecs["Launcher"].Template.Spec.Containers[0]
	worker = mj.Spec.MPIReplicaSpecs["Worker"].Template.Spec.Containers[0]
	cmd, err := parseMpirun(launcher.argv())
	if err != nil {
		t.Fatalf("launcher: %v", err)
	}
	return mj, launcher, worker, cmd
}

// sshConfig returns the value of each keyword of an ssh or sshd
// configuration file in deploy/docker (the first one wins, as in ssh).
func sshConfig(t *testing.T, name string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docker", name))
	if err != nil {
		t.Fatal(err)
	}
	kv := make(map[string]string)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if k := strings.ToLower(f[0]); kv[k] == "" {
			kv[k] = f[1]
		}
	}
	return kv
}

// TestMPIJobManifest checks the structure of mpijob.yaml against what the
// MPI Operator v2 does: mpirun starts replicas × slotsPerWorker ranks from
// the operator's hostfile, GOROVOD_RENDEZVOUS_ADDR names worker 0 (where
// rank 0 runs), the workers run the image's sshd on the port the
// launcher's ssh uses, with the key the operator mounts, and the secret
// reaches the ranks as a file.
func TestMPIJobManifest(t *testing.T) {
	mj, launcher, worker, cmd := mpiJobParts(t)
	workers, slots := *mj.Spec.MPIReplicaSpecs["Worker"].Replicas, 1 // slotsPerWorker's default
	if mj.Spec.SlotsPerWorker != nil {
		slots = *mj.Spec.SlotsPerWorker
	}
	if r := *mj.Spec.MPIReplicaSpecs["Launcher"].Replicas; r != 1 {
		t.Errorf("%d launchers, want 1", r)
	}
	if impl := mj.Spec.MPIImplementation; impl != "" && impl != "OpenMPI" {
		t.Errorf("mpiImplementation %q, want OpenMPI", impl)
	}
	if cmd.np != workers*slots {
		t.Errorf("mpirun -np %d, want Worker replicas × slotsPerWorker = %d × %d", cmd.np, workers, slots)
	}
	if cmd.hostfile != mpiHostfile {
		t.Errorf("mpirun --hostfile %q, want the operator's %s", cmd.hostfile, mpiHostfile)
	}
	if cmd.mapBy != "slot" {
		t.Errorf("mpirun --map-by %q, want slot (fill worker 0 first, so rank 0 runs there)", cmd.mapBy)
	}
	if len(cmd.program) == 0 || !filepath.IsAbs(cmd.program[0]) {
		t.Errorf("mpirun runs %q: want an absolute path (ssh sessions have a minimal PATH)", cmd.program)
	}
	x, err := cmd.exported(nil)
	if err != nil {
		t.Fatal(err)
	}
	host, _, err := net.SplitHostPort(x[jobenv.EnvRendezvousAddr])
	if err != nil {
		t.Fatalf("-x %s=%q: %v", jobenv.EnvRendezvousAddr, x[jobenv.EnvRendezvousAddr], err)
	}
	// The operator names worker i <job>-worker-<i> in the subdomain (and
	// headless Service) <job>-worker.
	worker0 := mj.Metadata.Name + "-worker-0." + mj.Metadata.Name + "-worker"
	if host != worker0 && !strings.HasPrefix(host, worker0+".") {
		t.Errorf("-x %s host %q, want worker 0: %s", jobenv.EnvRendezvousAddr, host, worker0)
	}
	if mj.Spec.LauncherCreationPolicy != "WaitForWorkersReady" {
		t.Errorf("launcherCreationPolicy %q, want WaitForWorkersReady", mj.Spec.LauncherCreationPolicy)
	}
	checkResources(t, launcher)
	checkResources(t, worker)
	checkSecretFile(t, mj.Spec.MPIReplicaSpecs["Worker"].Template.Spec, worker, x[jobenv.EnvSecretFile])

	sshd, ssh := sshConfig(t, "sshd_config"), sshConfig(t, "ssh_config")
	argv := worker.argv()
	if len(argv) < 2 || argv[0] != "/usr/sbin/sshd" || !slices.Contains(argv, "-De") {
		t.Errorf("worker command %q, want /usr/sbin/sshd -De ...", argv)
	}
	if i := slices.Index(argv, "-f"); i < 0 || i+1 == len(argv) || argv[i+1] != "/etc/gorovod/sshd_config" {
		t.Errorf("worker command %q, want -f /etc/gorovod/sshd_config (deploy/docker/sshd_config in the image)", argv)
	}
	if !within(sshd["hostkey"], mj.Spec.SSHAuthMountPath) {
		t.Errorf("sshd_config HostKey %q is not in the operator's key mount %s", sshd["hostkey"], mj.Spec.SSHAuthMountPath)
	}
	if sshd["port"] == "" || ssh["port"] != sshd["port"] {
		t.Errorf("sshd listens on port %q, ssh dials %q", sshd["port"], ssh["port"])
	}
	if p := worker.ReadinessProbe; p == nil || p.TCPSocket == nil || strconv.Itoa(p.TCPSocket.Port) != sshd["port"] {
		t.Errorf("worker readiness probe: want a TCP check of sshd's port %s", sshd["port"])
	}
}

// TestMPIJobDetect builds the environment Open MPI gives each rank (ranks
// fill the workers in order, slotsPerWorker each, plus the launcher's -x
// variables; a rank started over ssh sees nothing of its worker container's
// environment) and checks what jobenv.Detect makes of it.
func TestMPIJobDetect(t *testing.T) {
	mj, launcher, _, cmd := mpiJobParts(t)
	slots := 1 // the operator's default
	if mj.Spec.SlotsPerWorker != nil {
		slots = *mj.Spec.SlotsPerWorker
	}
	launcherEnv, err := podEnv(launcher, podMeta{name: mj.Metadata.Name + "-launcher-q8wz4", namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	x, err := cmd.exported(launcherEnv)
	if err != nil {
		t.Fatal(err)
	}
	file, secret := writeSecret(t)
	_, port, _ := net.SplitHostPort(x[jobenv.EnvRendezvousAddr])
	for r := range cmd.np {
		env := map[string]string{
			"OMPI_COMM_WORLD_RANK":       strconv.Itoa(r),
			"OMPI_COMM_WORLD_SIZE":       strconv.Itoa(cmd.np),
			"OMPI_COMM_WORLD_LOCAL_RANK": strconv.Itoa(r % slots),
			"OMPI_COMM_WORLD_LOCAL_SIZE": strconv.Itoa(slots),
			"OMPI_COMM_WORLD_NODE_RANK":  strconv.Itoa(r / slots),
			"OMPI_MCA_ess_base_jobid":    "1639514113",
		}
		maps.Copy(env, x)
		env[jobenv.EnvSecretFile] = file // the manifest's path exists only in the worker pods
		we, plan, err := jobenv.Detect(getenv(env))
		if err != nil {
			t.Fatalf("rank %d: jobenv.Detect: %v", r, err)
		}
		if we.Rank != r || we.Size != cmd.np || we.LocalRank != r%slots || we.LocalSize != slots {
			t.Errorf("rank %d: rank %d of %d, local %d of %d; want local %d of %d",
				r, we.Rank, we.Size, we.LocalRank, we.LocalSize, r%slots, slots)
		}
		if plan.Launcher != jobenv.LauncherOpenMPI || !plan.DeriveTopology {
			t.Errorf("rank %d: launcher %q, derive topology %v; want %q, true", r, plan.Launcher, plan.DeriveTopology, jobenv.LauncherOpenMPI)
		}
		if we.RendezvousAddr != x[jobenv.EnvRendezvousAddr] {
			t.Errorf("rank %d: rendezvous %q, want -x's %q", r, we.RendezvousAddr, x[jobenv.EnvRendezvousAddr])
		}
		if want := map[bool]string{true: ":" + port}[r == 0]; plan.ServeAddr != want {
			t.Errorf("rank %d: serves the rendezvous on %q, want %q", r, plan.ServeAddr, want)
		}
		if !bytes.Equal(we.Secret, secret) || len(plan.Notes) != 0 {
			t.Errorf("rank %d: the secret is not the one in GOROVOD_SECRET_FILE (notes: %q)", r, plan.Notes)
		}
	}
}

// TestExpand checks the model of Kubernetes' $(VAR) expansion.
func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "x", "B": "y"}
	for in, want := range map[string]string{
		"":             "",
		"$(A)-0.svc":   "x-0.svc",
		"$(A)$(B)":     "xy",
		"$(C)":         "$(C)",
		"$$(A)":        "$(A)",
		"$$":           "$",
		"a$b":          "a$b",
		"$(A":          "$(A",
		"tail$":        "tail$",
		"$(A)-$(C)-$$": "x-$(C)-$",
	} {
		if got := expand(in, vars); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}
