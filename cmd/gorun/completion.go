package main

import (
	"fmt"
	"io"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/gorovod/gorovod/settings"
	"github.com/urfave/cli/v2"
)

// The completion scripts and the manual page are generated at run time from
// the app's flags, so that a new flag shows up in them without a change
// here. What the flags cannot say about their values is below.

// flagChoices are the values of the flags that take one of a fixed set of
// words (a knob's from settings.Table); the scripts offer them. A test
// feeds each to the parser.
var flagChoices = choicesOf(map[string][]string{
	"launcher":   {"auto", "local", "ssh", "srun"},
	"bind-to":    {"core", "none"},
	"completion": completionShells,
})

// choicesOf returns choices with those of the knobs (settings.Table) added.
func choicesOf(choices map[string][]string) map[string][]string {
	for _, k := range settings.Table() {
		if k.Choices != nil {
			choices[k.Flag] = k.Choices
		}
	}
	return choices
}

// hostFlags are the flags whose value is a list of hosts (host:slots,
// comma separated); the scripts offer host names for them.
var hostFlags = map[string]bool{"hosts": true}

// completionShells are the shells gorun --completion writes scripts for.
var completionShells = []string{"bash", "zsh"}

// completionScript prints a completion script for shell.
func completionScript(w io.Writer, shell string, app *cli.App) error {
	var (
		script string
		err    error
	)
	switch shell {
	case "bash":
		script, err = bashScript(app)
	case "zsh":
		script, err = zshScript(app)
	default:
		return usagef("--completion %q: want %s", shell, strings.Join(completionShells, " or "))
	}
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, script)
	return err
}

// valueKind is what a flag's value is, as completion sees it.
type valueKind int

const (
	kindNone   valueKind = iota // a boolean flag: no value
	kindValue                   // a value nothing can be offered for
	kindFile                    // a file name
	kindHosts                   // host:slots,host:slots
	kindChoice                  // one of flagChoices
)

// flagInfo is one of the app's flags as the completion scripts and the
// manual page describe it.
type flagInfo struct {
	flag     cli.Flag
	names    []string // as typed on the command line: -np, -H, --hosts
	kind     valueKind
	choices  []string // for kindChoice
	usage    string   // the help text, placeholder backquotes removed
	value    string   // the value placeholder for a flag that takes one
	def      string   // the default as --help shows it; "" for none
	category string
	visible  bool
	repeat   bool // a slice flag: may be given more than once
}

// dashed returns name as gorun's usage and messages write it (and the
// scripts offer it): one dash before names of one or two letters (-H,
// -np), two before longer ones. The parser takes either spelling of any
// flag; --help writes --np.
func dashed(name string) string {
	if len(name) <= 2 {
		return "-" + name
	}
	return "--" + name
}

// safeWord is what a flag name or a choice must look like to go into a
// script unquoted.
var safeWord = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]*$`)

// appFlags describes app.Flags, in their order. After app.Setup (app.Run
// does it) they include --help and --version.
func appFlags(app *cli.App) ([]flagInfo, error) {
	var out []flagInfo
	for _, f := range app.Flags {
		fi := flagInfo{flag: f, visible: true, value: "value"}
		for _, n := range f.Names() {
			if n = strings.TrimSpace(n); n != "" {
				if !safeWord.MatchString(n) {
					return nil, fmt.Errorf("flag name %q: cannot put it in a completion script", n)
				}
				fi.names = append(fi.names, dashed(n))
			}
		}
		if len(fi.names) == 0 {
			continue
		}
		name := strings.TrimLeft(fi.names[0], "-")
		if v, ok := f.(cli.VisibleFlag); ok {
			fi.visible = v.IsVisible()
		}
		if c, ok := f.(cli.CategorizableFlag); ok {
			fi.category = c.GetCategory()
		}
		if s, ok := f.(cli.DocGenerationSliceFlag); ok {
			fi.repeat = s.IsSliceFlag()
		}
		d, ok := f.(cli.DocGenerationFlag)
		if !ok {
			out = append(out, fi)
			continue
		}
		placeholder, usage := splitPlaceholder(d.GetUsage())
		fi.usage = usage
		if placeholder != "" {
			fi.value = placeholder
		}
		if b, ok := f.(*cli.BoolFlag); !ok || !b.DisableDefaultText {
			fi.def = d.GetDefaultText()
		}
		switch {
		case !d.TakesValue():
			fi.kind = kindNone
		case flagChoices[name] != nil:
			fi.kind, fi.choices = kindChoice, flagChoices[name]
			for _, c := range fi.choices {
				if !safeWord.MatchString(c) {
					return nil, fmt.Errorf("--%s choice %q: cannot put it in a completion script", name, c)
				}
			}
		case hostFlags[name]:
			fi.kind = kindHosts
		case takesFile(f):
			fi.kind = kindFile
		default:
			fi.kind = kindValue
		}
		out = append(out, fi)
	}
	return out, nil
}

// splitPlaceholder returns the placeholder that usage names between
// backquotes ("load `FILE`"), if any, and usage without the backquotes,
// as --help shows them.
func splitPlaceholder(usage string) (placeholder, text string) {
	i := strings.IndexByte(usage, '`')
	if i < 0 {
		return "", usage
	}
	j := strings.IndexByte(usage[i+1:], '`')
	if j < 0 {
		return "", usage
	}
	placeholder = usage[i+1 : i+1+j]
	return placeholder, usage[:i] + placeholder + usage[i+1+j+1:]
}

// takesFile reports whether f's value is a file name: a PathFlag, or a flag
// with TakesFile set.
func takesFile(f cli.Flag) bool {
	if _, ok := f.(*cli.PathFlag); ok {
		return true
	}
	v := reflect.ValueOf(f)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return false
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return false
	}
	t := v.FieldByName("TakesFile")
	return t.IsValid() && t.Kind() == reflect.Bool && t.Bool()
}

// flagsByCategory groups the visible flags as --help does: the flags
// without a category first, then the categories in alphabetical order,
// each's flags sorted by their help line.
func flagsByCategory(flags []flagInfo) (categories []string, byCategory map[string][]flagInfo) {
	byCategory = map[string][]flagInfo{}
	for _, f := range flags {
		if !f.visible {
			continue
		}
		if _, ok := byCategory[f.category]; !ok {
			categories = append(categories, f.category)
		}
		byCategory[f.category] = append(byCategory[f.category], f)
	}
	sort.Strings(categories)
	for _, c := range categories {
		sort.SliceStable(byCategory[c], func(i, j int) bool {
			return byCategory[c][i].flag.String() < byCategory[c][j].flag.String()
		})
	}
	return categories, byCategory
}
