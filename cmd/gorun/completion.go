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

// bashScript returns the bash completion script for app.
func bashScript(app *cli.App) (string, error) {
	flags, err := appFlags(app)
	if err != nil {
		return "", err
	}
	var offered []string
	arms := map[string][]string{} // case arm (kind=...) -> flag names
	var order []string            // the arms by kind, then as they come
	for _, f := range flags {
		if f.visible {
			offered = append(offered, f.names...)
		}
		arm := "kind=" + [...]string{"none", "value", "file", "hosts", "choice"}[f.kind]
		if f.kind == kindChoice {
			arm += " choices='" + strings.Join(f.choices, " ") + "'"
		}
		if _, ok := arms[arm]; !ok {
			order = append(order, arm)
		}
		for _, n := range f.names {
			arms[arm] = append(arms[arm], strings.TrimLeft(n, "-"))
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		return strings.Fields(order[i])[0] < strings.Fields(order[j])[0]
	})
	var cases strings.Builder
	for _, arm := range order {
		fmt.Fprintf(&cases, "\t%s) %s ;;\n", strings.Join(arms[arm], "|"), arm)
	}
	return strings.NewReplacer(
		"@NAME@", app.Name,
		"@FLAGS@", strings.Join(offered, " "),
		"@CASES@", cases.String(),
	).Replace(bashTemplate), nil
}

// bashTemplate is the bash script; @FLAGS@ are the flags offered, @CASES@
// the case arms that tell what each flag (without its dashes) takes.
const bashTemplate = `# bash completion for @NAME@, generated from its flags by @NAME@ --completion bash.
#
# Load it into this shell:
#     source <(@NAME@ --completion bash)
# or have bash-completion load it in every shell:
#     @NAME@ --completion bash > ~/.local/share/bash-completion/completions/@NAME@

# _@NAME@_flag sets kind to what flag $1 (its name without dashes) takes:
# none (a boolean flag), value, file, hosts, choice (one of the words in
# choices), or unknown.
_@NAME@_flag() {
	choices=
	case $1 in
@CASES@	*) kind=unknown ;;
	esac
}

# _@NAME@ completes @NAME@'s flags and their values; from the program on
# (the first word that is neither a flag nor a flag's value, or the word
# after --), the words are the program's: files and commands, never
# @NAME@'s flags.
_@NAME@() {
	local flags='@FLAGS@'
	local -a w=()
	local kind= choices= cur pre name value prefix= prog= piece rest line i
	COMPREPLY=()

	# bash splits words at the characters of COMP_WORDBREAKS too
	# (--launcher=ssh, -H a:2): glue the pieces that no blank separates
	# back into the words as typed.
	if [[ -n ${COMP_LINE-} ]]; then
		line=$COMP_LINE
		for ((i = 0; i <= COMP_CWORD; i++)); do
			piece=${COMP_WORDS[i]}
			rest=${line#"${line%%[![:space:]]*}"}
			if [[ $rest != "$piece"* ]]; then
				w=()
				break
			fi
			if ((i > 0 && ${#rest} == ${#line})); then
				w[${#w[@]} - 1]+=$piece
			else
				w+=("$piece")
			fi
			line=${rest#"$piece"}
		done
	fi
	if ((${#w[@]} == 0)); then
		w=("${COMP_WORDS[@]:0:COMP_CWORD+1}")
	fi
	cur=${w[${#w[@]} - 1]}
	# Readline replaces only what follows the last word-break character of
	# the word: the replies leave out what precedes it (pre).
	pre=
	if [[ -n ${COMP_WORDBREAKS-} ]]; then
		pre=${cur%"${cur##*["$COMP_WORDBREAKS"]}"}
	fi

	# Walk the words before the current one: flags, their values, then
	# maybe the program.
	i=1
	while ((i < ${#w[@]} - 1)); do
		piece=${w[i]}
		if [[ $piece == -- ]]; then
			prog=$((i + 1))
			break
		fi
		if [[ $piece != -?* ]]; then
			prog=$i
			break
		fi
		name=${piece#-}
		name=${name#-}
		if [[ $name != *=* ]]; then
			_@NAME@_flag "$name"
			if [[ $kind != none && $kind != unknown ]]; then
				i=$((i + 1))
			fi
		fi
		i=$((i + 1))
	done

	value=$cur
	if [[ -n $prog ]]; then
		kind=program
		if ((prog < ${#w[@]} - 1)) || [[ $cur == */* ]]; then
			kind=file
		fi
	elif ((i == ${#w[@]} - 1)); then
		# cur is a flag, a flag with its value (--launcher=ssh), or the
		# program.
		if [[ $cur == -?*=* ]]; then
			name=${cur%%=*}
			prefix=$name=
			value=${cur#*=}
			name=${name#-}
			_@NAME@_flag "${name#-}"
			if [[ $kind == none ]]; then
				kind=choice choices='true false'
			fi
		elif [[ $cur == -* ]]; then
			kind=flag
		else
			kind=program
		fi
	fi
	# Else the previous word is a flag, and cur its value: kind is the
	# flag's.

	case $kind in
	flag)
		mapfile -t COMPREPLY < <(compgen -W "$flags" -- "$cur")
		;;
	choice)
		mapfile -t COMPREPLY < <(compgen -W "$choices" -- "$value")
		;;
	file)
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "$value")
		;;
	program)
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -c -- "$value"; compgen -f -- "$value")
		;;
	hosts)
		# host:slots,host:slots: complete the host after the last comma.
		if [[ $value == *,* ]]; then
			prefix+=${value%,*},
		fi
		mapfile -t COMPREPLY < <(compgen -A hostname -- "${value##*,}")
		;;
	esac
	for i in "${!COMPREPLY[@]}"; do
		piece=$prefix${COMPREPLY[i]}
		COMPREPLY[i]=${piece#"$pre"}
	done
	return 0
}

complete -F _@NAME@ @NAME@
`

// zshScript returns the zsh completion script for app.
func zshScript(app *cli.App) (string, error) {
	flags, err := appFlags(app)
	if err != nil {
		return "", err
	}
	var specs strings.Builder
	for _, f := range flags {
		if !f.visible {
			continue
		}
		fmt.Fprintf(&specs, "\t\t%s\n", zshSpec(f))
	}
	return strings.NewReplacer(
		"@NAME@", app.Name,
		"@SPECS@", specs.String(),
	).Replace(zshTemplate), nil
}

// zshSpec returns the _arguments specification of f, shell-quoted: for
// --launcher, '--launcher=[how ranks start]:launcher:(auto local ssh srun)'.
// A flag with several names gives one specification per name, each
// excluding the others.
func zshSpec(f flagInfo) string {
	var rest string // after the name
	if f.kind != kindNone {
		rest = "="
	}
	rest += "[" + zshEscapeDescription(shortUsage(f.usage)) + "]"
	msg := strings.TrimLeft(f.names[0], "-")
	switch f.kind {
	case kindValue:
		rest += ":" + msg + ": "
	case kindFile:
		rest += ":" + msg + ":_files"
	case kindHosts:
		rest += ":" + msg + ":_sequence _hosts"
	case kindChoice:
		rest += ":" + msg + ":(" + strings.Join(f.choices, " ") + ")"
	}
	var lead string
	if len(f.names) > 1 && !f.repeat {
		lead = "(" + strings.Join(f.names, " ") + ")"
	}
	if f.repeat {
		lead += "*"
	}
	if len(f.names) == 1 {
		return zshQuote(lead + f.names[0] + rest)
	}
	return zshQuote(lead) + "{" + strings.Join(f.names, ",") + "}" + zshQuote(rest)
}

// shortUsage cuts a flag's help text for zsh's list of flags: before its
// first semicolon, environment hint or sentence end, before its first
// parenthesis unless that leaves three words or fewer, without a last
// ": word" left dangling, and to 70 characters at most.
func shortUsage(s string) string {
	for _, sep := range []string{"; ", " [$", ". ", " ("} {
		i := strings.Index(s, sep)
		if i <= 0 || sep == " (" && len(strings.Fields(s[:i])) <= 3 {
			continue
		}
		s = s[:i]
		if j := strings.LastIndex(s, ": "); sep == " (" && j > 0 && len(strings.Fields(s[j:])) == 2 {
			s = s[:j]
		}
	}
	const most = 70
	if r := []rune(s); len(r) > most {
		s = string(r[:most])
		if i := strings.LastIndexByte(s, ' '); i > 0 {
			s = s[:i]
		}
		s += "..."
	}
	return strings.TrimSpace(s)
}

// zshEscapeDescription escapes what _arguments reads specially in the
// description between brackets.
func zshEscapeDescription(s string) string {
	return strings.NewReplacer(`\`, `\\`, `[`, `\[`, `]`, `\]`, `:`, `\:`).Replace(s)
}

// zshQuote quotes s for zsh, in single quotes.
func zshQuote(s string) string {
	if s == "" {
		return ""
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// zshTemplate is the zsh script; @SPECS@ are the _arguments
// specifications of the flags, one per line.
const zshTemplate = `#compdef @NAME@
# zsh completion for @NAME@, generated from its flags by @NAME@ --completion zsh.
#
# Install it in a directory of $fpath, then start a new zsh (or run
# compinit):
#     @NAME@ --completion zsh > "${fpath[1]}/_@NAME@"
# or load it into this shell, after compinit:
#     source <(@NAME@ --completion zsh)

# From the program on (the first word that is neither a flag nor a flag's
# value, or the word after --), the words are the program's: -A stops
# offering @NAME@'s flags there, and the program's own completion takes
# over.
_@NAME@() {
	local -a specs
	specs=(
@SPECS@		'(-)1:program:_command_names -e'
		'*::program argument:_normal'
	)
	_arguments -S -A '-*' : $specs
}

if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then
	_@NAME@ "$@"
else
	compdef _@NAME@ @NAME@
fi
`

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
