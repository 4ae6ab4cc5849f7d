package kubernetes

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// This file models the few fields of Kubernetes objects that the tests
// read, and what Kubernetes does with them: the downward API and $(VAR)
// expansion in a container's environment.

// object is one YAML document of a manifest.
type object struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	doc        *yaml.Node // the whole document, decoded again by kind
}

type objectMeta struct {
	Name        string            `yaml:"name"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type service struct {
	Metadata objectMeta `yaml:"metadata"`
	Spec     struct {
		ClusterIP                string            `yaml:"clusterIP"`
		PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
		Selector                 map[string]string `yaml:"selector"`
	} `yaml:"spec"`
}

type job struct {
	Metadata objectMeta `yaml:"metadata"`
	Spec     struct {
		CompletionMode string      `yaml:"completionMode"`
		Completions    *int        `yaml:"completions"`
		Parallelism    *int        `yaml:"parallelism"`
		BackoffLimit   *int        `yaml:"backoffLimit"`
		Template       podTemplate `yaml:"template"`
	} `yaml:"spec"`
}

type mpiJob struct {
	Metadata objectMeta `yaml:"metadata"`
	Spec     struct {
		SlotsPerWorker         *int                   `yaml:"slotsPerWorker"`
		MPIImplementation      string                 `yaml:"mpiImplementation"`
		SSHAuthMountPath       string                 `yaml:"sshAuthMountPath"`
		LauncherCreationPolicy string                 `yaml:"launcherCreationPolicy"`
		MPIReplicaSpecs        map[string]replicaSpec `yaml:"mpiReplicaSpecs"`
	} `yaml:"spec"`
}

type replicaSpec struct {
	Replicas *int        `yaml:"replicas"`
	Template podTemplate `yaml:"template"`
}

type podTemplate struct {
	Metadata objectMeta `yaml:"metadata"`
	Spec     podSpec    `yaml:"spec"`
}

type podSpec struct {
	Subdomain       string `yaml:"subdomain"`
	RestartPolicy   string `yaml:"restartPolicy"`
	SecurityContext struct {
		RunAsUser  *int64 `yaml:"runAsUser"`
		RunAsGroup *int64 `yaml:"runAsGroup"`
		FSGroup    *int64 `yaml:"fsGroup"`
	} `yaml:"securityContext"`
	InitContainers []container `yaml:"initContainers"`
	Containers     []container `yaml:"containers"`
	Volumes        []volume    `yaml:"volumes"`
}

type container struct {
	Name           string        `yaml:"name"`
	Image          string        `yaml:"image"`
	Command        []string      `yaml:"command"`
	Args           []string      `yaml:"args"`
	Env            []envVar      `yaml:"env"`
	VolumeMounts   []volumeMount `yaml:"volumeMounts"`
	ReadinessProbe *struct {
		TCPSocket *struct {
			Port int `yaml:"port"`
		} `yaml:"tcpSocket"`
	} `yaml:"readinessProbe"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
}

// argv is the container's command line (command, then args).
func (c container) argv() []string { return append(append([]string(nil), c.Command...), c.Args...) }

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		FieldRef *struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
	} `yaml:"valueFrom"`
}

type volumeMount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
	ReadOnly  bool   `yaml:"readOnly"`
}

type volume struct {
	Name   string `yaml:"name"`
	Secret *struct {
		SecretName  string `yaml:"secretName"`
		DefaultMode *int   `yaml:"defaultMode"`
	} `yaml:"secret"`
	EmptyDir *struct {
		Medium string `yaml:"medium"`
	} `yaml:"emptyDir"`
}

// readManifest returns every non-empty YAML document of the file.
func readManifest(t *testing.T, file string) []object {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var objs []object
	dec := yaml.NewDecoder(f)
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("%s: document %d: %v", file, len(objs)+1, err)
		}
		if len(doc.Content) == 0 {
			continue
		}
		var o object
		if err := doc.Decode(&o); err != nil {
			t.Fatalf("%s: document %d: %v", file, len(objs)+1, err)
		}
		o.doc = &doc
		objs = append(objs, o)
	}
}

// only decodes the one object of the given kind and API version in objs.
func only[T any](t *testing.T, objs []object, apiVersion, kind string) T {
	t.Helper()
	var out T
	n := 0
	for _, o := range objs {
		if o.Kind != kind {
			continue
		}
		n++
		if o.APIVersion != apiVersion {
			t.Errorf("%s %s: apiVersion %q, want %q", kind, o.Metadata.Name, o.APIVersion, apiVersion)
		}
		if err := o.doc.Decode(&out); err != nil {
			t.Fatalf("%s %s: %v", kind, o.Metadata.Name, err)
		}
	}
	if n != 1 {
		t.Fatalf("%d objects of kind %s, want 1", n, kind)
	}
	return out
}

// podMeta is what the downward API can tell a container about its pod.
type podMeta struct {
	name, namespace     string
	labels, annotations map[string]string
}

// fieldRefPattern matches the downward API's metadata.labels['key'] and
// metadata.annotations['key'].
var fieldRefPattern = regexp.MustCompile(`^metadata\.(labels|annotations)\['([^']+)'\]$`)

// field returns the value of a downward-API field path. A label or
// annotation the pod does not have is an error here (Kubernetes would give
// an empty value, which no rank could use).
func (p podMeta) field(fieldPath string) (string, error) {
	switch fieldPath {
	case "metadata.name":
		return p.name, nil
	case "metadata.namespace":
		return p.namespace, nil
	}
	m := fieldRefPattern.FindStringSubmatch(fieldPath)
	if m == nil {
		return "", fmt.Errorf("field path %q is not modelled", fieldPath)
	}
	from := p.labels
	if m[1] == "annotations" {
		from = p.annotations
	}
	v, ok := from[m[2]]
	if !ok {
		return "", fmt.Errorf("the pod has no %s %q", strings.TrimSuffix(m[1], "s"), m[2])
	}
	return v, nil
}

// podEnv returns the environment that Kubernetes gives container c of a
// pod: literal values with $(VAR) references to the variables defined
// before them expanded, and downward-API fields.
func podEnv(c container, pod podMeta) (map[string]string, error) {
	env := make(map[string]string)
	for _, v := range c.Env {
		switch {
		case v.ValueFrom == nil:
			env[v.Name] = expand(v.Value, env)
		case v.ValueFrom.FieldRef != nil:
			val, err := pod.field(v.ValueFrom.FieldRef.FieldPath)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", v.Name, err)
			}
			env[v.Name] = val
		default:
			return nil, fmt.Errorf("env %s: only values and fieldRef are modelled", v.Name)
		}
	}
	return env, nil
}

// expand replaces $(NAME) in s by the value of NAME in vars the way
// Kubernetes expands a container's env, command and args: a reference to a
// variable not in vars stays as written, and $$ is a literal $.
func expand(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			ref := s[i : i+3+end]
			if v, ok := vars[ref[2:len(ref)-1]]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(ref)
			}
			i += len(ref) - 1
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// mountOf returns the mount of the named volume in c.
func mountOf(c container, vol string) (volumeMount, bool) {
	for _, m := range c.VolumeMounts {
		if m.Name == vol {
			return m, true
		}
	}
	return volumeMount{}, false
}

// mountHolding returns c's mount whose directory holds file.
func mountHolding(c container, file string) (volumeMount, bool) {
	for _, m := range c.VolumeMounts {
		if within(file, m.MountPath) {
			return m, true
		}
	}
	return volumeMount{}, false
}

// within reports whether file lies inside directory dir.
func within(file, dir string) bool {
	return strings.HasPrefix(path.Clean(file), path.Clean(dir)+"/")
}

// volumeNamed returns the pod's volume of that name.
func (s podSpec) volumeNamed(name string) (volume, bool) {
	for _, v := range s.Volumes {
		if v.Name == name {
			return v, true
		}
	}
	return volume{}, false
}

// mpirunCmd is what the tests need of an mpirun command line.
type mpirunCmd struct {
	np       int
	hostfile string
	mapBy    string
	exports  []string // -x arguments in order: NAME or NAME=value
	program  []string // the program and its arguments
}

// mpirun options that take one value, and two; any other word that starts
// with "-" before the program is a flag alone.
var (
	mpirunOneValue = map[string]bool{"-np": true, "-n": true, "--np": true, "-c": true,
		"--hostfile": true, "-hostfile": true, "--machinefile": true, "-machinefile": true,
		"-H": true, "--host": true, "-host": true, "--map-by": true, "-map-by": true,
		"--bind-to": true, "-bind-to": true, "--rank-by": true, "-rank-by": true, "-x": true}
	mpirunTwoValues = map[string]bool{"-mca": true, "--mca": true, "-gmca": true, "--gmca": true}
)

// parseMpirun reads an Open MPI mpirun command line.
func parseMpirun(argv []string) (mpirunCmd, error) {
	var cmd mpirunCmd
	if len(argv) == 0 || path.Base(argv[0]) != "mpirun" {
		return cmd, fmt.Errorf("command %q is not mpirun", argv)
	}
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		switch {
		case !strings.HasPrefix(a, "-"):
			cmd.program = argv[i:]
			return cmd, nil
		case mpirunTwoValues[a]:
			i += 2
		case mpirunOneValue[a]:
			if i+1 == len(argv) {
				return cmd, fmt.Errorf("mpirun %s has no value", a)
			}
			i++
			v := argv[i]
			switch a {
			case "-np", "-n", "--np", "-c":
				n, err := strconv.Atoi(v)
				if err != nil {
					return cmd, fmt.Errorf("mpirun %s %q: %w", a, v, err)
				}
				cmd.np = n
			case "--hostfile", "-hostfile", "--machinefile", "-machinefile":
				cmd.hostfile = v
			case "--map-by", "-map-by":
				cmd.mapBy = v
			case "-x":
				cmd.exports = append(cmd.exports, v)
			}
		}
	}
	return cmd, errors.New("mpirun has no program to run")
}

// exported returns the variables mpirun's -x options give every rank:
// NAME=value as written, a bare NAME with the launcher's value of it.
func (c mpirunCmd) exported(launcherEnv map[string]string) (map[string]string, error) {
	out := make(map[string]string)
	for _, x := range c.exports {
		name, value, ok := strings.Cut(x, "=")
		if !ok {
			if value, ok = launcherEnv[name]; !ok {
				return nil, fmt.Errorf("mpirun -x %s: the launcher has no %s", name, name)
			}
		}
		out[name] = value
	}
	return out, nil
}
