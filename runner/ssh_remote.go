package runner

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gorovod/gorovod/internal/shellquote"
	"github.com/gorovod/gorovod/jobenv"
)

// sshMaxArg is the longest remote command, and the longest NAME=value a
// remote rank can get: sshd hands the command to the login shell as the
// single argument of -c, and Linux limits one argument or environment
// string to 128 KiB (MAX_ARG_STRLEN, with its NUL); so does the local
// execve of ssh.
const sshMaxArg = 128<<10 - 1

// sshEnvTag starts the environment that the spawner writes to ssh's
// standard input; see sshEnvStream.
const sshEnvTag = "gorovod-env"

// sshEnvReader is the part of sshWrapper that reads the environment from
// standard input (see sshEnvStream) into positional parameters: each
// variable becomes a word NAME=value in front of "--", so that nothing is
// assigned, exported or evaluated while reading. Its own variables are
// never exported, so no forwarded name can disturb it. A missing or
// malformed record ends the wrapper with status 125. The shell's read
// consumes no more than one line of a pipe, so the signal lines that
// follow stay for the watcher.
const sshEnvReader = `gorovod_bad() { echo "gorovod: incomplete or malformed environment on standard input" >&2; exit 125; }; ` +
	`gorovod_nl=$(printf "\nx"); gorovod_nl=${gorovod_nl%x}; set -- -- "$@"; ` +
	`IFS=" " read -r gorovod_tag gorovod_n || gorovod_bad; [ "$gorovod_tag" = ` + sshEnvTag + ` ] || gorovod_bad; ` +
	`case $gorovod_n in ""|0?*|*[!0123456789]*) gorovod_bad;; esac; ` +
	`while [ "$gorovod_n" -gt 0 ]; do ` +
	`IFS=" " read -r gorovod_name gorovod_k || gorovod_bad; ` +
	`case $gorovod_name in ""|[0123456789]*|*[!ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_]*) gorovod_bad;; esac; ` +
	`case $gorovod_k in ""|0?*|*[!0123456789]*) gorovod_bad;; esac; ` +
	`IFS= read -r gorovod_value || gorovod_bad; ` +
	`while [ "$gorovod_k" -gt 0 ]; do IFS= read -r gorovod_line || gorovod_bad; ` +
	`gorovod_value=$gorovod_value$gorovod_nl$gorovod_line; gorovod_k=$((gorovod_k - 1)); done; ` +
	`set -- "$gorovod_name=$gorovod_value" "$@"; gorovod_n=$((gorovod_n - 1)); done; `

// sshWrapper is the script that the remote /bin/sh runs, with positional
// parameters GRACE DIR ARGV...; see NewSSHSpawner. It
//
//  1. reads the environment from standard input (sshEnvReader);
//  2. changes to DIR, or warns and stays in the home directory;
//  3. starts the watcher in the background: a subshell that ignores the
//     signals it forwards, sends each signal named by a further line of
//     standard input to the session's process group (-$$), and at EOF sends
//     SIGTERM, sleeps GRACE seconds and sends SIGKILL (its standard input
//     goes through fd 3: an asynchronous list's is /dev/null otherwise);
//  4. runs ARGV in the foreground, input from /dev/null, from a subshell
//     that unsets GOROVOD_SECRET (the secret comes from gorun or not at
//     all), exports each NAME=value word and execs ARGV: the wrapper's own
//     shell never changes its variables, so the watcher keeps the remote
//     PATH (to find sleep whatever PATH the rank gets). A foreground command
//     keeps default SIGINT and SIGQUIT, which an asynchronous one would
//     ignore, while the wrapper's own traps keep it alive to collect the
//     status;
//  5. kills the watcher (it holds no child while it reads) and exits with
//     ARGV's status.
//
// It is one line, so that even a csh-family login shell can pass it on.
const sshWrapper = `gorovod_grace=$1 gorovod_dir=$2; shift 2; ` + sshEnvReader +
	`if [ -n "$gorovod_dir" ] && ! cd -- "$gorovod_dir" 2>/dev/null; then ` +
	`echo "gorovod: warning: cannot change to directory $gorovod_dir on $(uname -n); running in $PWD" >&2; fi; ` +
	`trap : HUP INT QUIT TERM USR1 USR2; exec 3<&0; ` +
	`( trap "" HUP INT QUIT TERM USR1 USR2; ` +
	`while IFS= read -r gorovod_sig; do kill -s "$gorovod_sig" -- -$$; done; ` +
	`kill -s TERM -- -$$; sleep "$gorovod_grace" </dev/null; kill -s KILL -- -$$ ) <&3 >/dev/null 2>&1 3<&- & ` +
	`gorovod_watch=$!; exec 3<&-; ` +
	`( unset GOROVOD_SECRET; while [ "$1" != -- ]; do export "$1" || exit 125; shift; done; shift; exec "$@" ) </dev/null; ` +
	`gorovod_status=$?; kill -s KILL "$gorovod_watch" 2>/dev/null; exit "$gorovod_status"`

// sshWrapperName is $0 of the wrapper: the shell names it in its messages
// ("gorovod-rank: 1: exec: ./train: not found").
const sshWrapperName = "gorovod-rank"

// sshRemoteCommand returns the command string that ssh hands to the remote
// login shell: exec /bin/sh -c WRAPPER gorovod-rank GRACE DIR ARGV...,
// every variable word shell-quoted. The environment is not part of it: it
// goes to ssh's standard input (sshEnvStream).
func sshRemoteCommand(grace int, dir string, argv []string) (string, error) {
	words := []string{"exec", "/bin/sh", "-c", shellquote.Quote(sshWrapper), sshWrapperName,
		strconv.Itoa(grace), shellquote.Quote(dir)}
	if strings.Contains(dir, "\x00") {
		return "", fmt.Errorf("working directory holds a NUL byte")
	}
	for i, arg := range argv {
		if strings.Contains(arg, "\x00") {
			return "", fmt.Errorf("argument %d of the command holds a NUL byte", i)
		}
		words = append(words, shellquote.Quote(arg))
	}
	cmd := strings.Join(words, " ")
	if len(cmd) > sshMaxArg {
		return "", fmt.Errorf("the remote command (wrapper, directory and arguments) is %d bytes, more than the %d a remote shell accepts",
			len(cmd), sshMaxArg)
	}
	return cmd, nil
}

// sshEnvStream returns env (NAME=value entries) as the wrapper reads it
// from ssh's standard input:
//
//	gorovod-env N        the tag and the number of variables, decimal
//	NAME K               for each variable: its name and the number of
//	LINE_0 ... LINE_K    newlines in its value, then the value cut at its
//	                     newlines into K+1 lines, each ending in a newline
//
// Values are written as they are, byte for byte; only their newlines
// matter to the framing, and the counts say where each value ends, so no
// value can be read as a name, a count or a signal line. A name must be a
// shell variable name; a value must not hold a NUL byte (no environment
// string can) and NAME=value must fit in sshMaxArg bytes. Errors name the
// variable, never its value.
func sshEnvStream(env []string) ([]byte, error) {
	var b strings.Builder
	b.WriteString(sshEnvTag + " " + strconv.Itoa(len(env)) + "\n")
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		switch {
		case !ok || !shellVarName(name):
			return nil, fmt.Errorf("environment entry %q: want NAME=value with a shell variable name", clip(name, maxQuoted))
		case strings.Contains(value, "\x00"):
			return nil, fmt.Errorf("variable %s holds a NUL byte", name)
		case len(kv) > sshMaxArg:
			return nil, fmt.Errorf("variable %s is %d bytes with its name, more than the %d a remote program accepts",
				name, len(kv), sshMaxArg)
		}
		b.WriteString(name + " " + strconv.Itoa(strings.Count(value, "\n")) + "\n")
		b.WriteString(value + "\n")
	}
	return []byte(b.String()), nil
}

// sshEnviron returns the variables a remote rank gets, as NAME=value, each
// name once and in order of first appearance: base (gorun's environment)
// minus the deny list and names a shell cannot export, then the -x entries
// of forward, then cmdEnv. GOROVOD_SECRET comes from cmdEnv only: it is
// denied in base and skipped in forward.
func sshEnviron(base, forward, cmdEnv []string) ([]string, error) {
	var e sshEnv
	for _, kv := range base {
		if name, value, ok := strings.Cut(kv, "="); ok && shellVarName(name) && !sshDenied(name) {
			e.set(name, value)
		}
	}
	for _, fw := range forward {
		name, value, hasValue := strings.Cut(fw, "=")
		if !shellVarName(name) {
			return nil, fmt.Errorf("forwarded variable %q: not a shell variable name", clip(name, maxQuoted))
		}
		if !hasValue {
			value, hasValue = sshLookupEnv(base, name)
		}
		if hasValue && name != jobenv.EnvSecret {
			e.set(name, value)
		}
	}
	for _, kv := range cmdEnv {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !shellVarName(name) {
			return nil, fmt.Errorf("environment entry %q: want NAME=value with a shell variable name", clip(name, maxQuoted))
		}
		e.set(name, value)
	}
	return e.entries(), nil
}

// sshEnv is an ordered set of variables.
type sshEnv struct {
	names  []string
	values map[string]string
}

// set gives name value, keeping name's first position.
func (e *sshEnv) set(name, value string) {
	if e.values == nil {
		e.values = make(map[string]string)
	}
	if _, ok := e.values[name]; !ok {
		e.names = append(e.names, name)
	}
	e.values[name] = value
}

// entries returns the variables as NAME=value.
func (e *sshEnv) entries() []string {
	kv := make([]string, len(e.names))
	for i, name := range e.names {
		kv[i] = name + "=" + e.values[name]
	}
	return kv
}

// sshLookupEnv returns the value of name in env (the last entry wins, as in
// os/exec).
func sshLookupEnv(env []string, name string) (value string, ok bool) {
	for _, kv := range env {
		if n, v, found := strings.Cut(kv, "="); found && n == name {
			value, ok = v, true
		}
	}
	return value, ok
}

// shellVarName reports whether name is a variable name a POSIX shell can
// export: a letter or _, then letters, digits and _.
func shellVarName(name string) bool {
	for i, r := range name {
		letter := 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || r == '_'
		if !letter && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return name != ""
}

// sshDenied reports whether gorun's variable name stays behind when a rank
// starts on another machine: it describes gorun's machine, login or
// terminal (see NewSSHSpawner), or it is the secret.
func sshDenied(name string) bool {
	switch name {
	case "HOME", "USER", "LOGNAME", "SHELL", "HOSTNAME", "HOST", "PWD", "OLDPWD", "SHLVL", "_",
		"MAIL", "TMPDIR", "TERM", "TERMCAP", "COLORTERM", "DISPLAY", "XAUTHORITY", "WINDOWID",
		"LS_COLORS", "DBUS_SESSION_BUS_ADDRESS", "SESSION_MANAGER", "KRB5CCNAME",
		"TMUX", "TMUX_PANE", "STY", "CUDA_VISIBLE_DEVICES", jobenv.EnvSecret:
		return true
	}
	for _, prefix := range []string{"SSH_", "XDG_", "SUDO_", "TERM_", "BASH_FUNC_"} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}
