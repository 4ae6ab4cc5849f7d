package runner

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestShellVarName(t *testing.T) {
	for name, want := range map[string]bool{
		"A": true, "_": true, "a_1": true, "PATH": true, "": false, "1A": false,
		"A-B": false, "A.B": false, "BASH_FUNC_f%%": false, "É": false, "A B": false,
	} {
		if got := shellVarName(name); got != want {
			t.Errorf("shellVarName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestSSHEnviron(t *testing.T) {
	base := []string{
		"PATH=/opt/bin:/usr/bin", "HOME=/home/me", "USER=me", "TMPDIR=/tmp/me", "SSH_AUTH_SOCK=/s",
		"XDG_RUNTIME_DIR=/run/user/1", "DISPLAY=:0", "LANG=C.UTF-8", "BASH_FUNC_f%%=() { :; }",
		"GOROVOD_SECRET=fromgorun", "MY_VAR=1", "MY_VAR=2", "CUDA_VISIBLE_DEVICES=0,1",
	}
	forward := []string{"DISPLAY", "UNSET_VAR", "SET=x y", "GOROVOD_SECRET"}
	cmdEnv := []string{"GOROVOD_RANK=3", "GOROVOD_SECRET=abcd", "LANG=en_US.UTF-8", "SET=z"}
	env, err := sshEnviron(base, forward, cmdEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH=/opt/bin:/usr/bin", "LANG=en_US.UTF-8", "MY_VAR=2", "DISPLAY=:0", "SET=z",
		"GOROVOD_RANK=3", "GOROVOD_SECRET=abcd"}
	if !slices.Equal(env, want) {
		t.Errorf("env\n got %q\nwant %q", env, want)
	}
}

func TestSSHEnvironErrors(t *testing.T) {
	for _, tc := range []struct {
		name            string
		forward, cmdEnv []string
		want            string
	}{
		{"bad -x name", []string{"A-B"}, nil, `forwarded variable "A-B"`},
		{"entry without =", nil, []string{"NOVALUE"}, `environment entry "NOVALUE"`},
		{"bad entry name", nil, []string{"1X=y"}, `environment entry "1X"`},
	} {
		_, err := sshEnviron(nil, tc.forward, tc.cmdEnv)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %s", tc.name, err, tc.want)
		}
	}
}

func TestSSHDenied(t *testing.T) {
	for _, name := range []string{"HOME", "USER", "SSH_CONNECTION", "XDG_SESSION_ID", "TERM", "_", "PWD",
		"CUDA_VISIBLE_DEVICES", "GOROVOD_SECRET", "BASH_FUNC_x"} {
		if !sshDenied(name) {
			t.Errorf("%s is forwarded, want it denied", name)
		}
	}
	for _, name := range []string{"PATH", "LD_LIBRARY_PATH", "LANG", "LC_ALL", "GOROVOD_RANK", "GOMAXPROCS", "TERMINFO_X"} {
		if sshDenied(name) {
			t.Errorf("%s is denied, want it forwarded", name)
		}
	}
}

func TestSSHCommandShape(t *testing.T) {
	const secret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	sp := NewSSHSpawner(SSHConfig{
		Port: 2222, IdentityFile: "/keys/id", ConnectTimeout: 1500 * time.Millisecond,
		ExtraArgs: []string{"-o", "UserKnownHostsFile=/kh"}, ForwardEnv: []string{"X=1"},
	}).(*sshSpawner)
	sp.environ = func() []string { return []string{"PATH=/bin", "HOME=/h", "TOKEN=hf_abc"} }
	c := Command{Argv: []string{"./train", "--lr", "0.1"}, Dir: "/work dir",
		Env: []string{"GOROVOD_RANK=1", "GOROVOD_SECRET=" + secret}}
	argv, stdin, err := sp.command("node1", c)
	if err != nil {
		t.Fatal(err)
	}
	wantStdin := "gorovod-env 5\nPATH 0\n/bin\nTOKEN 0\nhf_abc\nX 0\n1\nGOROVOD_RANK 0\n1\nGOROVOD_SECRET 0\n" + secret + "\n"
	if string(stdin) != wantStdin {
		t.Errorf("ssh's standard input\n got %q\nwant %q", stdin, wantStdin)
	}
	wantHead := []string{"ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=2", "-o", "ServerAliveInterval=30",
		"-o", "ServerAliveCountMax=3", "-T", "-x", "-p", "2222", "-i", "/keys/id",
		"-o", "UserKnownHostsFile=/kh", "--", "node1"}
	if len(argv) != len(wantHead)+1 || !reflect.DeepEqual(argv[:len(wantHead)], wantHead) {
		t.Fatalf("argv = %q, want %q and the remote command", argv, wantHead)
	}
	for _, a := range argv {
		for _, v := range []string{secret, "hf_abc", "TOKEN", "GOROVOD_RANK", "PATH=", "X=1"} {
			if strings.Contains(a, v) {
				t.Errorf("%q is on ssh's command line: %q", v, a)
			}
		}
	}
	remote := argv[len(argv)-1]
	wantTail := " gorovod-rank 5 '/work dir' ./train --lr 0.1"
	if !strings.HasPrefix(remote, "exec /bin/sh -c '") || !strings.HasSuffix(remote, wantTail) {
		t.Errorf("remote command = %q, want exec /bin/sh -c '...'%s", remote, wantTail)
	}
}

func TestSSHRemoteCommandErrors(t *testing.T) {
	if _, err := sshRemoteCommand(1, "", []string{"p", strings.Repeat("x", sshMaxArg)}); err == nil ||
		!strings.Contains(err.Error(), "more than") {
		t.Errorf("huge command: err = %v, want a size error", err)
	}
	if _, err := sshRemoteCommand(1, "", []string{"p", "a\x00"}); err == nil || !strings.Contains(err.Error(), "argument 1") {
		t.Errorf("NUL in an argument: err = %v", err)
	}
	if _, err := sshRemoteCommand(1, "/a\x00", []string{"p"}); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("NUL in the directory: err = %v", err)
	}
	sp := NewSSHSpawner(SSHConfig{}).(*sshSpawner)
	if _, _, err := sp.command("h", Command{}); err == nil {
		t.Error("empty command: no error")
	}
}

func TestSSHTail(t *testing.T) {
	var tail sshTail
	for i := range 3000 {
		_, _ = tail.Write([]byte("line " + strings.Repeat("x", i%7) + "\n"))
	}
	_, _ = tail.Write([]byte("ssh: connect to host h port 22: Connection refused\r\n"))
	got := tail.String()
	if lines := strings.Split(got, "\n"); len(lines) != sshTailLines ||
		lines[len(lines)-1] != "ssh: connect to host h port 22: Connection refused" {
		t.Errorf("tail = %q", got)
	}
}

func TestSSHCheckErrorFormat(t *testing.T) {
	err := &SSHCheckError{Hosts: []*SSHError{
		{Host: "node3", Rank: -1, Stderr: "ssh: connect to host node3 port 22: Connection refused"},
		{Host: "node4", Rank: -1, Stderr: "line one\nline two"},
	}}
	want := "runner: cannot reach 2 hosts over ssh:\n" +
		"  node3: ssh: connect to host node3 port 22: Connection refused\n" +
		"  node4: line one\n    line two"
	if err.Error() != want {
		t.Errorf("got\n%s\nwant\n%s", err.Error(), want)
	}
}

func TestSSHEnvStream(t *testing.T) {
	got, err := sshEnvStream([]string{"A=1", "EMPTY=", "ML=x\ny\n", "Q=it's $x `y`", "NL=\n"})
	if err != nil {
		t.Fatal(err)
	}
	want := "gorovod-env 5\nA 0\n1\nEMPTY 0\n\nML 2\nx\ny\n\nQ 0\nit's $x `y`\nNL 1\n\n\n"
	if string(got) != want {
		t.Errorf("stream\n got %q\nwant %q", got, want)
	}
	if got, err := sshEnvStream(nil); err != nil || string(got) != "gorovod-env 0\n" {
		t.Errorf("empty environment: %q, %v", got, err)
	}
	for _, tc := range []struct {
		kv, want string
	}{
		{"TOKEN=hush\x00hush", "variable TOKEN holds a NUL byte"},
		{"TOKEN=" + strings.Repeat("hush", sshMaxArg/4), "variable TOKEN is 131074 bytes with its name, more than the 131071"},
		{"A B=hush", `environment entry "A B"`},
		{"NOEQUALS", `environment entry "NOEQUALS"`},
	} {
		_, err := sshEnvStream([]string{"OK=1", tc.kv})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.20q: err = %v, want it to mention %q", tc.kv, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hush") {
			t.Errorf("%.20q: the error repeats the value: %v", tc.kv, err)
		}
	}
}

// sshEnvReaderDump runs after sshEnvReader: it prints each NAME=value word,
// then the arguments, then the next line of standard input, each ending in
// a NUL byte.
const sshEnvReaderDump = `while [ "$1" != -- ]; do printf 'env:%s\0' "$1"; shift; done; shift; ` +
	`printf 'arg:%s\0' "$@"; IFS= read -r gorovod_rest; printf 'rest:%s\0' "$gorovod_rest"`

// sshTestShells returns the POSIX shells installed here to run the
// wrapper with: /bin/sh, and dash and bash (also in POSIX mode) where
// found.
func sshTestShells() [][]string {
	shells := [][]string{{"/bin/sh"}}
	for _, sh := range [][]string{{"dash"}, {"bash"}, {"bash", "--posix"}, {"busybox", "sh"}, {"mksh"}, {"ksh"}} {
		if path, err := exec.LookPath(sh[0]); err == nil {
			shells = append(shells, append([]string{path}, sh[1:]...))
		}
	}
	return shells
}

// sshReadBack has shell run sshEnvReader on stdin, with the arguments
// "a b", "--" and "c", and returns the NAME=value words it read (sorted), the
// arguments and the line of standard input that follows, or its exit
// status and standard error when it fails.
func sshReadBack(t *testing.T, shell []string, stdin string) (env []string, rest []string, status int, stderr string) {
	t.Helper()
	args := append(shell[1:len(shell):len(shell)], "-c", sshEnvReader+sshEnvReaderDump, sshWrapperName, "a b", "--", "c")
	cmd := exec.Command(shell[0], args...)
	cmd.Stdin = strings.NewReader(stdin)
	var errBuf strings.Builder
	cmd.Stderr = &errBuf
	out, err := cmd.Output()
	var xe *exec.ExitError
	switch {
	case errors.As(err, &xe):
		return nil, nil, xe.ExitCode(), errBuf.String()
	case err != nil:
		t.Fatal(err)
	}
	for _, w := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if kv, ok := strings.CutPrefix(w, "env:"); ok {
			env = append(env, kv)
		} else {
			rest = append(rest, w)
		}
	}
	slices.Sort(env)
	return env, rest, 0, errBuf.String()
}

// TestSSHEnvReader has each shell read tricky values back exactly, and
// leave the signal lines that follow the environment on standard input.
func TestSSHEnvReader(t *testing.T) {
	var env []string
	for i, v := range sshTrickyValues {
		env = append(env, "V"+strconv.Itoa(i)+"="+v)
	}
	env = append(env, "gorovod_n=7", "gorovod_k=x", "gorovod_value=v", "gorovod_nl=", "IFS=x", "PATH=/nonexistent")
	stream, err := sshEnvStream(env)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(env)
	for _, shell := range sshTestShells() {
		got, rest, status, stderr := sshReadBack(t, shell, string(stream)+"USR1\nINT\n")
		if status != 0 {
			t.Fatalf("%s: status %d: %s", shell, status, stderr)
		}
		if !slices.Equal(got, env) {
			for i := range max(len(got), len(env)) {
				if i >= len(got) || i >= len(env) || got[i] != env[i] {
					t.Errorf("%s: read back\n got %.60q...\nwant %.60q...", shell, got[i:], env[i:])
					break
				}
			}
		}
		if want := []string{"arg:a b", "arg:--", "arg:c", "rest:USR1"}; !slices.Equal(rest, want) {
			t.Errorf("%s: then %q, want %q", shell, rest, want)
		}
	}
}

// TestSSHEnvReaderMalformed feeds the reader broken streams: each ends it
// with status 125 and a message, and none runs a command.
func TestSSHEnvReaderMalformed(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "pwned")
	inject := "touch " + marker
	for _, stream := range []string{
		"",
		"gorovod-env\n",
		"gorovod-env x\n",
		"gorovod-env 01\nA 0\n1\n",
		"gorovod-env -1\n",
		"other 1\nA 0\n1\n",
		"gorovod-env 1\n",
		"gorovod-env 1\nA 0\n",
		"gorovod-env 2\nA 0\n1\n",
		"gorovod-env 1\nA 2\nx\ny\n",
		"gorovod-env 1\nA 1x\nx\ny\n",
		"gorovod-env 1\nA\n1\n",
		"gorovod-env 1\n1A 0\n1\n",
		"gorovod-env 1\nA-B 0\n1\n",
		"gorovod-env 1\na[$(" + inject + ")] 0\n1\n",
		"gorovod-env 1\nA;" + inject + " 0\n1\n",
		"gorovod-env 1\n$(" + inject + ") 0\n1\n",
		"gorovod-env 1\nA $(" + inject + ")\n1\n",
		"gorovod-env $(" + inject + ")\n",
		"gorovod-env 1\nÉ 0\n1\n",
		"gorovod-env 1\nA 0\n1", // no final newline
	} {
		for _, shell := range sshTestShells() {
			_, _, status, stderr := sshReadBack(t, shell, stream)
			if status != 125 || !strings.Contains(stderr, "gorovod: incomplete or malformed environment on standard input") {
				t.Errorf("%s: %q: status %d, stderr %q; want 125 and a message", shell, stream, status, stderr)
			}
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a malformed stream ran a command")
	}
}

func FuzzSSHEnvStream(f *testing.F) {
	for _, v := range sshTrickyValues[:len(sshTrickyValues)-1] {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, value string) {
		if strings.Contains(value, "\x00") || len(value) > 4096 {
			t.Skip("no environment string holds a NUL byte; long values are slow to read")
		}
		env := []string{"A=" + value, "B=" + value + "\n" + value}
		stream, err := sshEnvStream(env)
		if err != nil {
			t.Fatal(err)
		}
		got, rest, status, stderr := sshReadBack(t, []string{"/bin/sh"}, string(stream)+"HUP\n")
		if status != 0 {
			t.Fatalf("status %d: %s", status, stderr)
		}
		if !slices.Equal(got, env) || !slices.Equal(rest, []string{"arg:a b", "arg:--", "arg:c", "rest:HUP"}) {
			t.Errorf("read back %q then %q, want %q", got, rest, env)
		}
	})
}
