package runner

import (
	"fmt"
	"strconv"
	"strings"
)

// sshMaxCommand is the longest remote command: sshd hands it to the login
// shell as the single argument of -c, and Linux limits one argument to
// 128 KiB (MAX_ARG_STRLEN, with its NUL); so does the local execve of ssh.
const sshMaxCommand = 128<<10 - 1

// sshWrapper is the script that the remote /bin/sh runs, with positional
// parameters GRACE DIR NAME=value... -- ARGV...; see NewSSHSpawner. It
//
//  1. reads one line of standard input into GOROVOD_SECRET and exports it
//     (unsets it when the line is empty);
//  2. changes to DIR, or warns and stays in the home directory;
//  3. exports each NAME=value up to "--" (the watcher keeps the remote
//     PATH, to find sleep whatever PATH the rank gets);
//  4. starts the watcher in the background: a subshell that ignores the
//     signals it forwards, sends each signal named by a further line of
//     standard input to the session's process group (-$$), and at EOF sends
//     SIGTERM, sleeps GRACE seconds and sends SIGKILL (its standard input
//     goes through fd 3: an asynchronous list's is /dev/null otherwise);
//  5. runs ARGV in the foreground, input from /dev/null (a foreground
//     command keeps default SIGINT and SIGQUIT, which an asynchronous one
//     would ignore), while its own traps keep it alive to collect the
//     status;
//  6. kills the watcher (it holds no child while it reads) and exits with
//     ARGV's status.
//
// It is one line, so that even a csh-family login shell can pass it on.
const sshWrapper = `gorovod_grace=$1 gorovod_dir=$2; shift 2; ` +
	`IFS= read -r GOROVOD_SECRET || { echo "gorovod: no job secret on standard input" >&2; exit 125; }; ` +
	`if [ -n "$GOROVOD_SECRET" ]; then export GOROVOD_SECRET; else unset GOROVOD_SECRET; fi; ` +
	`if [ -n "$gorovod_dir" ] && ! cd -- "$gorovod_dir" 2>/dev/null; then ` +
	`echo "gorovod: warning: cannot change to directory $gorovod_dir on $(uname -n); running in $PWD" >&2; fi; ` +
	`gorovod_path=$PATH; while [ $# -gt 0 ] && [ "$1" != -- ]; do export "$1" || exit 125; shift; done; shift; ` +
	`trap : HUP INT QUIT TERM USR1 USR2; exec 3<&0; ` +
	`( trap "" HUP INT QUIT TERM USR1 USR2; PATH=$gorovod_path; ` +
	`while IFS= read -r gorovod_sig; do kill -s "$gorovod_sig" -- -$$; done; ` +
	`kill -s TERM -- -$$; sleep "$gorovod_grace" </dev/null; kill -s KILL -- -$$ ) <&3 >/dev/null 2>&1 3<&- & ` +
	`gorovod_watch=$!; exec 3<&-; ` +
	`"$@" </dev/null; gorovod_status=$?; ` +
	`kill -s KILL "$gorovod_watch" 2>/dev/null; exit "$gorovod_status"`

// sshWrapperName is $0 of the wrapper: the shell names it in its messages
// ("gorovod-rank: 1: ./train: not found").
const sshWrapperName = "gorovod-rank"

// sshRemoteCommand returns the command string that ssh hands to the remote
// login shell: exec /bin/sh -c WRAPPER gorovod-rank GRACE DIR ENV... -- ARGV...,
// every variable word shell-quoted.
func sshRemoteCommand(grace int, dir string, env, argv []string) (string, error) {
	words := []string{"exec", "/bin/sh", "-c", shellQuote(sshWrapper), sshWrapperName,
		strconv.Itoa(grace), shellQuote(dir)}
	if strings.Contains(dir, "\x00") {
		return "", fmt.Errorf("working directory holds a NUL byte")
	}
	for _, kv := range env {
		if strings.Contains(kv, "\x00") {
			name, _, _ := strings.Cut(kv, "=")
			return "", fmt.Errorf("variable %s holds a NUL byte", name)
		}
		words = append(words, shellQuote(kv))
	}
	words = append(words, "--")
	for i, arg := range argv {
		if strings.Contains(arg, "\x00") {
			return "", fmt.Errorf("argument %d of the command holds a NUL byte", i)
		}
		words = append(words, shellQuote(arg))
	}
	cmd := strings.Join(words, " ")
	if len(cmd) > sshMaxCommand {
		return "", fmt.Errorf("the remote command (environment and arguments) is %d bytes, more than the %d a remote shell accepts",
			len(cmd), sshMaxCommand)
	}
	return cmd, nil
}

// shellQuote returns s as one word of a POSIX shell command: as it is when
// it holds only characters that are never special (letters, digits and
// _ - . / : , + @ %), otherwise between single quotes, each single quote
// written as quote, backslash, quote, quote:
//
//	it's  ->  'it'\''s'
//	(empty)  ->  two single quotes
//
// s must not hold a NUL byte, which no shell word can carry.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, shellSpecial) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellSpecial reports whether r may need quoting in a shell word.
func shellSpecial(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return false
	}
	return !strings.ContainsRune("_-./:,+@%", r)
}

// sshEnviron returns the variables a remote rank gets, as NAME=value, each
// name once and in order of first appearance: base (gorun's environment)
// minus the deny list and names a shell cannot export, then the -x entries
// of forward, then cmdEnv. GOROVOD_SECRET is taken out of all three; its
// value in cmdEnv is returned as secret.
func sshEnviron(base, forward, cmdEnv []string) (env []string, secret string, err error) {
	var e sshEnv
	for _, kv := range base {
		if name, value, ok := strings.Cut(kv, "="); ok && shellVarName(name) && !sshDenied(name) {
			e.set(name, value)
		}
	}
	for _, fw := range forward {
		name, value, hasValue := strings.Cut(fw, "=")
		if !shellVarName(name) {
			return nil, "", fmt.Errorf("forwarded variable %q: not a shell variable name", clip(name, maxQuoted))
		}
		if !hasValue {
			value, hasValue = sshLookupEnv(base, name)
		}
		if hasValue && name != EnvSecret {
			e.set(name, value)
		}
	}
	for _, kv := range cmdEnv {
		name, value, ok := strings.Cut(kv, "=")
		switch {
		case !ok || !shellVarName(name):
			return nil, "", fmt.Errorf("environment entry %q: want NAME=value with a shell variable name", clip(name, maxQuoted))
		case name == EnvSecret:
			secret = value
		default:
			e.set(name, value)
		}
	}
	if strings.ContainsAny(secret, "\n\x00") {
		return nil, "", fmt.Errorf("%s holds a newline or NUL byte", EnvSecret)
	}
	return e.entries(), secret, nil
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
		"TMUX", "TMUX_PANE", "STY", "CUDA_VISIBLE_DEVICES", EnvSecret:
		return true
	}
	for _, prefix := range []string{"SSH_", "XDG_", "SUDO_", "TERM_", "BASH_FUNC_"} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}
