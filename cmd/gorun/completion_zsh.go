package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

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
