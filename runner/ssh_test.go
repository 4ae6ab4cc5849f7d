package runner

import (
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// shellQuoteCases are words that a shell must read back unchanged.
var shellQuoteCases = []string{
	"", " ", "plain", "two words", "it's", "'", "''", `"double"`, "$HOME", "${x:-y}", "$(id)", "`id`",
	`back\slash`, `\`, `\'`, "new\nline", "tab\there", "*", "?", "[a]", "~", "~user", "a=b", "-n", "--",
	"!", "#comment", "a;b", "a|b", "a&b", "(x)", "{x}", "<x>", "é ü 世界", "\x01\x7f\xff", "%s%%", "trailing\n",
}

func TestShellQuoteExact(t *testing.T) {
	for in, want := range map[string]string{
		"":            "''",
		"plain":       "plain",
		"/usr/bin/x":  "/usr/bin/x",
		"a-b_c.d:e,f": "a-b_c.d:e,f",
		"two words":   "'two words'",
		"it's":        `'it'\''s'`,
		"$HOME":       "'$HOME'",
		"a=b":         "'a=b'",
		"~":           "'~'",
		"new\nline":   "'new\nline'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestShellQuoteRoundTrip has /bin/sh read quoted words back.
func TestShellQuoteRoundTrip(t *testing.T) {
	words := make([]string, len(shellQuoteCases))
	for i, s := range shellQuoteCases {
		words[i] = shellQuote(s)
	}
	// One word per NUL-terminated record, so that newlines survive.
	out, err := exec.Command("/bin/sh", "-c", `printf '%s\0' `+strings.Join(words, " ")).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if !slices.Equal(got, shellQuoteCases) {
		t.Errorf("round trip through sh:\n got %q\nwant %q", got, shellQuoteCases)
	}
}

func FuzzShellQuote(f *testing.F) {
	for _, s := range shellQuoteCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.Contains(s, "\x00") {
			t.Skip("no shell word holds a NUL byte")
		}
		out, err := exec.Command("/bin/sh", "-c", `printf '%s' `+shellQuote(s)).Output()
		if err != nil {
			t.Fatalf("sh: %v", err)
		}
		if string(out) != s {
			t.Errorf("sh read %q back as %q (quoted %q)", s, out, shellQuote(s))
		}
	})
}

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
	env, secret, err := sshEnviron(base, forward, cmdEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH=/opt/bin:/usr/bin", "LANG=en_US.UTF-8", "MY_VAR=2", "DISPLAY=:0", "SET=z", "GOROVOD_RANK=3"}
	if !slices.Equal(env, want) {
		t.Errorf("env\n got %q\nwant %q", env, want)
	}
	if secret != "abcd" {
		t.Errorf("secret = %q, want abcd", secret)
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
		{"secret with newline", nil, []string{"GOROVOD_SECRET=ab\ncd"}, "GOROVOD_SECRET holds a newline"},
	} {
		_, _, err := sshEnviron(nil, tc.forward, tc.cmdEnv)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %s", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "ab\ncd") {
			t.Errorf("%s: error repeats the secret: %v", tc.name, err)
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
	sp.environ = func() []string { return []string{"PATH=/bin", "HOME=/h"} }
	c := Command{Argv: []string{"./train", "--lr", "0.1"}, Dir: "/work dir",
		Env: []string{"GOROVOD_RANK=1", "GOROVOD_SECRET=" + secret}}
	argv, gotSecret, err := sp.command("node1", c)
	if err != nil {
		t.Fatal(err)
	}
	if gotSecret != secret {
		t.Errorf("secret for stdin = %q, want %q", gotSecret, secret)
	}
	wantHead := []string{"ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=2", "-o", "ServerAliveInterval=30",
		"-o", "ServerAliveCountMax=3", "-T", "-x", "-p", "2222", "-i", "/keys/id",
		"-o", "UserKnownHostsFile=/kh", "--", "node1"}
	if len(argv) != len(wantHead)+1 || !reflect.DeepEqual(argv[:len(wantHead)], wantHead) {
		t.Fatalf("argv = %q, want %q and the remote command", argv, wantHead)
	}
	for _, a := range argv {
		if strings.Contains(a, secret) {
			t.Fatalf("the secret is on ssh's command line: %q", a)
		}
	}
	remote := argv[len(argv)-1]
	wantTail := " gorovod-rank 5 '/work dir' 'PATH=/bin' 'X=1' 'GOROVOD_RANK=1' -- ./train --lr 0.1"
	if !strings.HasPrefix(remote, "exec /bin/sh -c '") || !strings.HasSuffix(remote, wantTail) {
		t.Errorf("remote command = %q, want exec /bin/sh -c '...'%s", remote, wantTail)
	}
}

func TestSSHRemoteCommandErrors(t *testing.T) {
	if _, err := sshRemoteCommand(1, "", []string{"A=" + strings.Repeat("x", sshMaxCommand)}, []string{"p"}); err == nil ||
		!strings.Contains(err.Error(), "more than") {
		t.Errorf("huge environment: err = %v, want a size error", err)
	}
	if _, err := sshRemoteCommand(1, "", []string{"A=x\x00"}, []string{"p"}); err == nil || !strings.Contains(err.Error(), "A holds a NUL") {
		t.Errorf("NUL in a value: err = %v", err)
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
