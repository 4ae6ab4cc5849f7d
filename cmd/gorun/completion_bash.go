package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"
)

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
