package jobenv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// maxTFConfig bounds the size of a TF_CONFIG spec, as maxClusterSpec
// bounds a GOROVOD_CLUSTER file.
const maxTFConfig = 1 << 20

// Task types of a TF_CONFIG cluster.
const (
	TFChief     = "chief"     // the one task that also saves checkpoints: rank 0
	TFMaster    = "master"    // TensorFlow 1's name for the chief, read as the chief
	TFWorker    = "worker"    // a training task: the ranks after the chief
	TFPS        = "ps"        // a parameter server: a parameter-server job (see DetectTask)
	TFEvaluator = "evaluator" // evaluates checkpoints beside the job: not a rank
)

// tfIgnored lists keys that TensorFlow's TF_CONFIG (and Google's AI
// Platform Training, which writes it too) may carry besides "cluster" and
// "task", and that gorovod ignores; any other key is an error, to catch a
// misspelt one. The first set is top-level, the second inside "task".
var (
	tfIgnoredTop  = []string{"environment", "rpc_layer", "job"}
	tfIgnoredTask = []string{"trial", "cloud"}
)

// TFConfig is a cluster spec in the shape of TensorFlow's TF_CONFIG, which
// Kubeflow's TFJob operator sets in every pod:
//
//	{"cluster": {"chief": ["h0:2222"], "worker": ["h1:2222", "h2:2222"]},
//	 "task": {"type": "worker", "index": 0}}
//
// Without "ps" tasks it is an all-reduce job, as MultiWorkerMirroredStrategy
// reads it: the chief is rank 0 and the workers follow in order (see
// AllReduceAddrs and Rank).
type TFConfig struct {
	// Cluster maps each task type (TFChief, TFMaster, TFWorker, TFPS,
	// TFEvaluator) to the "host:port" of each of its tasks.
	Cluster map[string][]string
	// Task is this process's task.
	Task TFTask
}

// TFTask names one task of a TF_CONFIG cluster.
type TFTask struct {
	Type  string // a key of TFConfig.Cluster
	Index int    // position in that type's list
}

// ParseTFConfig reads a TF_CONFIG spec and checks it: one JSON object of at
// most 1 MiB with a non-empty "cluster" of known task types, each a
// non-empty list of distinct host:port addresses (port 1..65535), at most
// one chief (or master), at least one chief or worker, and a "task" whose
// "type" is in the cluster and whose "index" is in range. The keys
// "environment", "rpc_layer" and "job" (and "trial" and "cloud" inside
// "task"), which TensorFlow and AI Platform write, are ignored; any other
// key is an error.
func ParseTFConfig(data []byte) (TFConfig, error) {
	if len(data) > maxTFConfig {
		return TFConfig{}, fmt.Errorf("TF_CONFIG spec of %d bytes: larger than %d MiB, the most it may hold", len(data), maxTFConfig>>20)
	}
	top, err := decodeObject(data, "the spec")
	if err != nil {
		return TFConfig{}, err
	}
	if err := unknownKeys(top, "the spec", []string{"cluster", "task"}, tfIgnoredTop); err != nil {
		return TFConfig{}, err
	}
	var c TFConfig
	if c.Cluster, err = parseTFCluster(top["cluster"]); err != nil {
		return TFConfig{}, err
	}
	if c.Task, err = parseTFTask(top["task"], c.Cluster); err != nil {
		return TFConfig{}, err
	}
	return c, nil
}

// decodeObject decodes one JSON object of raw values, and nothing after it.
func decodeObject(data []byte, what string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("%s is empty", what)
		}
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return nil, fmt.Errorf("%s is a JSON %s, want an object", what, typeErr.Value)
		}
		return nil, fmt.Errorf("%s is not JSON: %w", what, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s has text after its JSON object", what)
	}
	if obj == nil {
		return nil, fmt.Errorf("%s is null, want an object", what)
	}
	return obj, nil
}

// unknownKeys fails on a key of obj that is neither known nor ignored.
func unknownKeys(obj map[string]json.RawMessage, where string, known, ignored []string) error {
	var bad []string
	for k := range obj {
		if !slices.Contains(known, k) && !slices.Contains(ignored, k) {
			bad = append(bad, strconv.Quote(clip(k, maxQuoted)))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return fmt.Errorf("%s has unknown key %s (known: %s; ignored: %s)", where, strings.Join(bad, ", "),
		strings.Join(known, ", "), strings.Join(ignored, ", "))
}

// parseTFCluster checks the "cluster" object.
func parseTFCluster(raw json.RawMessage) (map[string][]string, error) {
	if raw == nil {
		return nil, errors.New(`the spec has no "cluster"`)
	}
	obj, err := decodeObject(raw, `"cluster"`)
	if err != nil {
		return nil, err
	}
	if len(obj) == 0 {
		return nil, errors.New(`"cluster" lists no tasks`)
	}
	roles := []string{TFChief, TFMaster, TFWorker, TFPS, TFEvaluator}
	cluster := make(map[string][]string, len(obj))
	seen := map[string]string{} // address -> "type[index]" of its first task
	for _, role := range slices.Sorted(maps.Keys(obj)) {
		if !slices.Contains(roles, role) {
			return nil, fmt.Errorf(`"cluster" has unknown task type %q: want chief, worker, ps or evaluator (or master, an old name for chief)`, clip(role, maxQuoted))
		}
		var addrs []string
		if err := json.Unmarshal(obj[role], &addrs); err != nil {
			return nil, fmt.Errorf(`"cluster" %q: want a list of "host:port" strings`, role)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf(`"cluster" %q: the list is empty`, role)
		}
		for i, a := range addrs {
			task := fmt.Sprintf("%s[%d]", role, i)
			if err := checkTFAddr(a); err != nil {
				return nil, fmt.Errorf(`"cluster" %s %q: %w`, task, clip(a, maxQuoted), err)
			}
			if first, dup := seen[a]; dup {
				return nil, fmt.Errorf(`"cluster" %s %q: the same address as %s`, task, clip(a, maxQuoted), first)
			}
			seen[a] = task
		}
		cluster[role] = addrs
	}
	switch {
	case len(cluster[TFChief])+len(cluster[TFMaster]) > 1:
		return nil, fmt.Errorf(`"cluster" has %d chief tasks (chief and master together): at most one`,
			len(cluster[TFChief])+len(cluster[TFMaster]))
	case len(cluster[TFChief])+len(cluster[TFMaster])+len(cluster[TFWorker]) == 0:
		return nil, errors.New(`"cluster" has no chief or worker task: nothing to train`)
	}
	return cluster, nil
}

// checkTFAddr checks one "host:port".
func checkTFAddr(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return errors.New(`want "host:port"`)
	}
	if host == "" {
		return errors.New("the host is empty")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strings.ContainsAny(port, "+-") {
		return fmt.Errorf("port %q is not in 1..65535", clip(port, maxQuoted))
	}
	return nil
}

// parseTFTask checks the "task" object against the cluster.
func parseTFTask(raw json.RawMessage, cluster map[string][]string) (TFTask, error) {
	if raw == nil {
		return TFTask{}, errors.New(`the spec has no "task": it says which task this process is`)
	}
	obj, err := decodeObject(raw, `"task"`)
	if err != nil {
		return TFTask{}, err
	}
	if err := unknownKeys(obj, `"task"`, []string{"type", "index"}, tfIgnoredTask); err != nil {
		return TFTask{}, err
	}
	var t TFTask
	switch {
	case obj["type"] == nil:
		return TFTask{}, errors.New(`"task" has no "type"`)
	case json.Unmarshal(obj["type"], &t.Type) != nil:
		return TFTask{}, errors.New(`"task" "type" is not a string`)
	case obj["index"] == nil:
		return TFTask{}, errors.New(`"task" has no "index"`)
	case json.Unmarshal(obj["index"], &t.Index) != nil:
		return TFTask{}, fmt.Errorf(`"task" "index" %s is not an integer`, clip(string(obj["index"]), maxQuoted))
	}
	n, ok := cluster[t.Type]
	switch {
	case !ok:
		return TFTask{}, fmt.Errorf(`"task" type %q is not in "cluster" (which has %s)`, clip(t.Type, maxQuoted),
			strings.Join(slices.Sorted(maps.Keys(cluster)), ", "))
	case t.Index < 0:
		return TFTask{}, fmt.Errorf(`"task" index %d is negative`, t.Index)
	case t.Index >= len(n):
		return TFTask{}, fmt.Errorf(`"task" index %d is out of range: "cluster" has %d %q tasks`, t.Index, len(n), t.Type)
	}
	return t, nil
}

// AllReduceAddrs returns the addresses of the all-reduce job's ranks: the
// chief (or master) first, then the workers in order. Evaluators and
// parameter servers are not ranks.
func (c TFConfig) AllReduceAddrs() []string {
	addrs := append([]string(nil), c.Cluster[TFChief]...)
	addrs = append(addrs, c.Cluster[TFMaster]...)
	return append(addrs, c.Cluster[TFWorker]...)
}

// Rank returns this task's rank in the all-reduce job: 0 for the chief,
// the worker's index (plus one when there is a chief) for a worker. A spec
// with parameter servers (an error wrapping ErrPSJob: DetectTask reads
// it), and an evaluator task, are errors: they are not all-reduce ranks.
func (c TFConfig) Rank() (int, error) {
	if n := len(c.Cluster[TFPS]); n > 0 {
		return 0, fmt.Errorf(`%w: the cluster has "ps" tasks (%d): run its tasks with ps.Run (or ps.Join), not with an all-reduce job's Init; without "ps" tasks the chief and workers form an all-reduce job`, ErrPSJob, n)
	}
	switch c.Task.Type {
	case TFChief, TFMaster:
		return 0, nil
	case TFWorker:
		return len(c.Cluster[TFChief]) + len(c.Cluster[TFMaster]) + c.Task.Index, nil
	}
	return 0, fmt.Errorf(`this task is the %s: it does not join the all-reduce job of the chief and workers (run an evaluating program there, or leave the %s out of the spec)`,
		c.Task.Type, c.Task.Type)
}

// tfConfigReader reads TF_CONFIG.
func tfConfigReader() launcherReader {
	return launcherReader{
		name:  LauncherTFConfig,
		vars:  []string{EnvTFConfig},
		match: func(d detector) bool { return d.getenv(EnvTFConfig) != "" },
		read: func(d detector) (placement, error) {
			c, err := ParseTFConfig([]byte(d.getenv(EnvTFConfig)))
			if err != nil {
				return placement{}, err
			}
			return tfPlacement(c, "tfconfig:")
		},
	}
}

// isTFConfigShape says whether data is a JSON object with a "cluster" or a
// "task" key: a TF_CONFIG spec rather than a ClusterSpec.
func isTFConfigShape(data []byte) bool {
	var obj map[string]json.RawMessage
	if json.Unmarshal(data, &obj) != nil {
		return false
	}
	_, cluster := obj["cluster"]
	_, task := obj["task"]
	return cluster || task
}

// tfPlacement places this task in the all-reduce job: rank 0 (the chief)
// serves the rendezvous on its own address, and the job id (for the
// derived token) is prefix and the ranks' addresses.
func tfPlacement(c TFConfig, prefix string) (placement, error) {
	rank, err := c.Rank()
	if err != nil {
		return placement{}, err
	}
	addrs := c.AllReduceAddrs()
	hostOf := make([]string, len(addrs))
	for i, a := range addrs {
		hostOf[i], _, _ = net.SplitHostPort(a)
	}
	_, port, _ := net.SplitHostPort(addrs[0])
	rdvPort, _ := strconv.Atoi(port)
	p := slotPlacement(hostOf, rank)
	p.rdvHost, p.rdvPort, p.jobID = hostOf[0], rdvPort, prefix+strings.Join(addrs, ",")
	return p, nil
}
