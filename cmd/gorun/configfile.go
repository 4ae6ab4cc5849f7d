package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"

	"github.com/gorovod/gorovod/internal/readlimit"
)

// notInConfigFile are the flags that a config file may not set: the file
// itself, and the flags that print something and exit.
var notInConfigFile = map[string]bool{
	"config-file": true, "check-build": true, "completion": true, "man": true, "help": true, "version": true,
}

// fileSetting is one key of a config file: the flag it sets (by its
// first name), the values to set (several for a list), and where it is.
type fileSetting struct {
	key    string // as written
	flag   string
	values []string
	line   int
}

// applyConfigFile reads --config-file, if given, and sets every flag it
// names that the command line did not set: a flag on the command line
// wins over the file. A flag the file sets counts as set, so its GOROVOD_
// variable no longer applies: the file wins over the environment. Errors
// are usage errors naming the file and the line.
func applyConfigFile(c *cli.Context) error {
	path := c.String("config-file")
	if path == "" {
		return nil
	}
	data, err := readConfigFile(path)
	if errors.Is(err, errConfigTooLarge) {
		return usagef("--config-file %s: %v", path, err)
	}
	if err != nil {
		return usagef("--config-file: %v", err)
	}
	settings, err := parseConfigFile(data, c.App.Flags)
	if err != nil {
		return usagef("--config-file %s: %v", path, err)
	}
	for _, s := range settings {
		if c.IsSet(s.flag) {
			continue
		}
		for _, v := range s.values {
			if err := c.Set(s.flag, v); err != nil {
				return usagef("--config-file %s: line %d: %s: invalid value %q: %v", path, s.line, s.key, v, err)
			}
		}
	}
	return nil
}

// maxConfigFile bounds the size of a config file: gorun reads at most one
// byte more, so a path such as /dev/zero fails at once instead of filling
// memory.
const maxConfigFile = 1 << 20

// errConfigTooLarge is readConfigFile's error for a file over maxConfigFile.
var errConfigTooLarge = fmt.Errorf("larger than %d MiB, the most a config file may hold", maxConfigFile>>20)

// readConfigFile reads the file at path, which may hold at most
// maxConfigFile bytes (errConfigTooLarge).
func readConfigFile(path string) ([]byte, error) {
	data, err := readlimit.File(path, maxConfigFile)
	if errors.Is(err, readlimit.ErrTooLarge) {
		return nil, errConfigTooLarge
	}
	return data, err
}

// parseConfigFile reads a YAML mapping of flag names to values: a flag's
// name or alias, with '_' for '-' allowed (fusion_threshold_mb, as
// horovodrun's files spell it); a scalar value, or a list of scalars for a
// flag that may be repeated (hosts, x). An empty file sets nothing.
func parseConfigFile(data []byte, flags []cli.Flag) ([]fileSetting, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("not valid YAML: %v", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if len(extra.Content) > 0 {
			line = extra.Content[0].Line
		}
		return nil, fmt.Errorf("line %d: a second YAML document; want one mapping of flags to values", line)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: want a mapping of flags to values (np: 4), not %s", root.Line, yamlKind(root))
	}
	byName := map[string]cli.Flag{}
	for _, f := range flags {
		for _, n := range f.Names() {
			byName[n] = f
		}
	}
	var out []fileSetting
	seen := map[string]int{} // flag -> line of its key
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: a key must be a flag name, not %s", k.Line, yamlKind(k))
		}
		f := byName[strings.ReplaceAll(k.Value, "_", "-")]
		if f == nil {
			return nil, fmt.Errorf("line %d: unknown key %q%s", k.Line, k.Value, keySuggestion(k.Value, flags))
		}
		name := f.Names()[0]
		if notInConfigFile[name] {
			return nil, fmt.Errorf("line %d: %s cannot be set in a config file", k.Line, k.Value)
		}
		if at, ok := seen[name]; ok {
			return nil, fmt.Errorf("line %d: %s sets %s again (line %d)", k.Line, k.Value, name, at)
		}
		seen[name] = k.Line
		values, err := settingValues(k.Value, v, f)
		if err != nil {
			return nil, err
		}
		out = append(out, fileSetting{key: k.Value, flag: name, values: values, line: k.Line})
	}
	return out, nil
}

// settingValues returns the values that node gives flag f (written as
// key): one for a scalar, one per item of a list for a repeatable flag.
func settingValues(key string, node *yaml.Node, f cli.Flag) ([]string, error) {
	_, repeatable := f.(*cli.StringSliceFlag)
	switch {
	case node.Kind == yaml.ScalarNode && node.Tag == "!!null":
		return nil, fmt.Errorf("line %d: %s has no value", node.Line, key)
	case node.Kind == yaml.ScalarNode:
		if _, ok := f.(*cli.BoolFlag); ok {
			// YAML 1.1's other spellings of booleans, which many files
			// still use.
			switch strings.ToLower(node.Value) {
			case "yes", "on", "y":
				return []string{"true"}, nil
			case "no", "off", "n":
				return []string{"false"}, nil
			}
		}
		return []string{node.Value}, nil
	case node.Kind == yaml.SequenceNode && repeatable:
		var vals []string
		for _, item := range node.Content {
			if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
				return nil, fmt.Errorf("line %d: an item of %s must be a value, not %s", item.Line, key, yamlKind(item))
			}
			vals = append(vals, item.Value)
		}
		if len(vals) == 0 {
			return nil, fmt.Errorf("line %d: %s is an empty list", node.Line, key)
		}
		return vals, nil
	case node.Kind == yaml.SequenceNode:
		return nil, fmt.Errorf("line %d: %s takes one value, not a list", node.Line, key)
	}
	return nil, fmt.Errorf("line %d: %s takes a value, not %s", node.Line, key, yamlKind(node))
}

// yamlKind names what a node is, for messages.
func yamlKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("the value %q", n.Value)
	}
	return "nothing"
}

// keySuggestion is "; did you mean fusion-threshold-mb?" for a key a few
// letters off a flag's name, else "".
func keySuggestion(key string, flags []cli.Flag) string {
	best := closestName(strings.ReplaceAll(key, "_", "-"), flags, func(name string) bool { return notInConfigFile[name] })
	if best == "" {
		return ""
	}
	return "; did you mean " + best + "?"
}
