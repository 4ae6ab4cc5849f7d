package jobenv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gorovod/gorovod/internal/hostlist"
	"github.com/gorovod/gorovod/internal/readlimit"
)

// maxClusterSpec bounds the size of a GOROVOD_CLUSTER spec file: at most
// one byte more is read, so @/dev/zero fails at once.
const maxClusterSpec = 1 << 20

// ClusterSpec is a job started by hand, one command per process, in the
// manner of TensorFlow's TF_CONFIG: GOROVOD_CLUSTER holds it as JSON (or
// "@path" of a file that does), for example
//
//	{"hosts": ["10.0.0.1:2", "10.0.0.2:2"], "port": 29400, "index": 3}
//
// Hosts are in the -H form ("host" is one slot, "host:N" N slots); ranks
// fill them in order, as under gorun. Index is this process's rank; set
// GOROVOD_CLUSTER_INDEX instead so that every process can share one file.
// Rank 0 (the first slot of the first host) serves the rendezvous on Port,
// or on a port derived from the host list when Port is 0.
//
// GOROVOD_CLUSTER may hold a spec in TF_CONFIG's shape instead (an object
// with a "cluster" or "task" key; see TFConfig), read as TF_CONFIG is.
type ClusterSpec struct {
	Hosts []string `json:"hosts"`
	Port  int      `json:"port,omitempty"`
	Index *int     `json:"index,omitempty"`
}

// ParseClusterSpec reads a spec from JSON; unknown fields are errors.
func ParseClusterSpec(data []byte) (ClusterSpec, error) {
	var s ClusterSpec
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return ClusterSpec{}, fmt.Errorf("not a cluster spec: %w", err)
	}
	if dec.More() {
		return ClusterSpec{}, errors.New("not a cluster spec: text after the JSON object")
	}
	switch {
	case len(s.Hosts) == 0:
		return ClusterSpec{}, errors.New(`the spec lists no "hosts"`)
	case s.Port < 0 || s.Port >= 1<<16:
		return ClusterSpec{}, fmt.Errorf(`"port" %d is not a port number`, s.Port)
	}
	return s, nil
}

// clusterReader reads GOROVOD_CLUSTER and GOROVOD_CLUSTER_INDEX.
func clusterReader() launcherReader {
	return launcherReader{
		name:  LauncherCluster,
		vars:  []string{EnvCluster, EnvClusterIndex},
		match: func(d detector) bool { return d.getenv(EnvCluster) != "" },
		read:  readCluster,
	}
}

// readCluster places this process by its index in the spec's slots, or,
// for a spec in TF_CONFIG's shape (see TFConfig), by its task.
func readCluster(d detector) (placement, error) {
	data, err := readClusterData(d.getenv(EnvCluster))
	if err != nil {
		return placement{}, err
	}
	if isTFConfigShape(data) {
		if d.getenv(EnvClusterIndex) != "" {
			return placement{}, fmt.Errorf(`%s is set, but the spec is in TF_CONFIG's shape, whose "task" says which task this process is`, EnvClusterIndex)
		}
		c, err := ParseTFConfig(data)
		if err != nil {
			return placement{}, err
		}
		return tfPlacement(c, "cluster:")
	}
	spec, err := ParseClusterSpec(data)
	if err != nil {
		return placement{}, err
	}
	hosts, err := hostlist.Parse(strings.Join(spec.Hosts, ","))
	if err != nil {
		return placement{}, err
	}
	var hostOf []string // the host of each slot, filled in order as under gorun
	for _, h := range hosts {
		for range h.Slots {
			hostOf = append(hostOf, h.Name)
		}
	}
	index, err := clusterIndex(d, spec, len(hostOf))
	if err != nil {
		return placement{}, err
	}
	p := slotPlacement(hostOf, index)
	p.rdvHost, p.rdvPort, p.jobID = hosts[0].Name, spec.Port, "cluster:"+hostlist.Format(hosts)
	return p, nil
}

// readClusterData returns the variable's value, or the contents of the
// file it names as @path.
func readClusterData(v string) ([]byte, error) {
	data := []byte(v)
	if path, ok := strings.CutPrefix(v, "@"); ok {
		var err error
		switch data, err = readlimit.File(path, maxClusterSpec); {
		case errors.Is(err, readlimit.ErrTooLarge):
			return nil, fmt.Errorf("%s: larger than %d MiB, the most a cluster spec may hold", path, maxClusterSpec>>20)
		case err != nil:
			return nil, err
		}
	}
	return data, nil
}

// clusterIndex returns GOROVOD_CLUSTER_INDEX, else the spec's index, and
// checks it against the number of slots.
func clusterIndex(d detector, spec ClusterSpec, slots int) (int, error) {
	index := -1
	if s := d.getenv(EnvClusterIndex); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, fmt.Errorf("%s=%q: not an integer", EnvClusterIndex, clip(s, maxQuoted))
		}
		index = n
	} else if spec.Index != nil {
		index = *spec.Index
	} else {
		return 0, fmt.Errorf(`this process's index is neither in the spec ("index") nor in %s`, EnvClusterIndex)
	}
	if index < 0 || index >= slots {
		return 0, fmt.Errorf("index %d is not in [0, %d): the spec's hosts have %d slots", index, slots, slots)
	}
	return index, nil
}

// slotPlacement places rank among the slots of hostOf (the host of each
// slot, in rank order, as gorun fills them): its ranks and sizes, its
// host, every slot's host, and the distinct hosts in order of first
// appearance. The caller adds the rendezvous and the job id.
func slotPlacement(hostOf []string, rank int) placement {
	s := SlotsOf(hostOf)[rank]
	p := placement{rank: s.Rank, size: s.Size, localRank: s.LocalRank, localSize: s.LocalSize,
		crossRank: s.CrossRank, crossSize: s.CrossSize, host: s.Host, hosts: hostOf}
	for _, h := range hostOf {
		if !slices.Contains(p.nodes, h) {
			p.nodes = append(p.nodes, h)
		}
	}
	return p
}
