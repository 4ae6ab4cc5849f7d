package runner

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sshEnvRank is a rank that writes its pid to $1 and its environment
// (env -0) to $2, says "ready", and waits for the file $3.
const sshEnvRank = `echo $$ > "$1"; env -0 > "$2.tmp" && mv "$2.tmp" "$2"; echo ready
while [ ! -e "$3" ]; do sleep 0.05; done`

// TestSSHEnvNotOnCommandLine starts a rank with variables from each
// source (gorun's environment, -x NAME=value, -x NAME, the GOROVOD_*
// contract) and checks, while it runs, that no value is on the command
// line of any process — the local ssh client, sshd's session, the remote
// shell, the rank — where every user could read it with ps; and that the
// rank has each value exactly.
func TestSSHEnvNotOnCommandLine(t *testing.T) {
	forEachSSHTarget(t, func(t *testing.T, tg sshTarget) {
		marker := func(what string) string { return "s3cr3t-" + what + "-" + rand.Text() }
		want := map[string]string{
			"GOROVOD_TEST_MARKER":     marker("environ"),
			"AWS_SECRET_ACCESS_KEY":   marker("x-value"),
			"HF_TOKEN":                marker("x-name"),
			"GOROVOD_RENDEZVOUS_ADDR": marker("contract"),
			"GOROVOD_SECRET":          marker("secret"),
		}
		environ := []string{"PATH=" + os.Getenv("PATH"), "GOROVOD_TEST_MARKER=" + want["GOROVOD_TEST_MARKER"],
			"HF_TOKEN=" + want["HF_TOKEN"]}
		tg.cfg.ForwardEnv = []string{"AWS_SECRET_ACCESS_KEY=" + want["AWS_SECRET_ACCESS_KEY"], "HF_TOKEN"}
		dir := t.TempDir()
		pidFile, envFile, stop := filepath.Join(dir, "pid"), filepath.Join(dir, "env"), filepath.Join(dir, "stop")
		c := sshShCommand(sshEnvRank, pidFile, envFile, stop)
		c.Env = []string{"GOROVOD_RANK=5", "GOROVOD_RENDEZVOUS_ADDR=" + want["GOROVOD_RENDEZVOUS_ADDR"],
			"GOROVOD_SECRET=" + want["GOROVOD_SECRET"]}
		r := spawnSSH(t, tg, c, environ)
		r.stdout.waitFor(t, "ready")
		rank := sshReadPID(t, pidFile)

		cmdlines := sshCmdlines()
		for pid, cmdline := range cmdlines {
			for name, value := range want {
				if bytes.Contains(cmdline, []byte(value)) {
					t.Errorf("the value of %s is on the command line of process %d: %q", name, pid, cmdline)
				}
			}
		}
		// The check saw the processes that matter: ssh (whose remote
		// command the remote shell gets as its argument), the wrapper and
		// the rank.
		client := r.p.cmd.Process.Pid
		if !bytes.Contains(cmdlines[client], []byte(sshWrapperName)) {
			t.Errorf("the ssh client's command line %q (pid %d) was not read", cmdlines[client], client)
		}
		if !bytes.Contains(cmdlines[rank], []byte(sshEnvRank)) {
			t.Errorf("the rank's command line %q (pid %d) was not read", cmdlines[rank], rank)
		}
		sawWrapper := false
		for pid, cmdline := range cmdlines {
			sawWrapper = sawWrapper || pid != client && bytes.Contains(cmdline, []byte("/bin/sh\x00-c\x00"+sshWrapper[:20]))
		}
		if !sawWrapper {
			t.Error("no remote wrapper among the processes: the check saw nothing")
		}

		got := sshReadEnv0(t, envFile)
		for name, value := range want {
			if got[name] != value {
				t.Errorf("the rank has %s=%q, want %q", name, got[name], value)
			}
		}
		if err := os.WriteFile(stop, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := r.waitExit(t, 10*time.Second); err != nil {
			t.Fatalf("Wait: %v", err)
		}
	})
}

// sshTrickyValues are variable values that must reach a remote rank
// exactly.
var sshTrickyValues = []string{
	"", " ", "  lead and trail  ", "two words", "it's", "'", `"double"`, "$HOME", "${x:-y}", "$(id)",
	"`id`", "$((1+1))", `back\slash`, `\`, `\n`, `\\`, "new\nline", "\n", "\n\n", "trailing\n\n",
	"\nleading", "cr\r\nlf", "tab\there", "*", "?", "[a]", "~", "!", "#x", "a;b|c&d", "-n", "--", "-e x",
	"é ü 世界 🙂", "\x01\x02\x7f\xff\xfe", "%s%%%d", "a=b=c", "NAME 3", "gorovod-env 2\nPATH 0\n/evil",
	"x\nFOO 0\nbar", "; kill -9 -1", "\"; exit 0; \"", "') ; id ; ('", strings.Repeat("long ", 20000),
}

// TestSSHEnvRoundTrip has a remote rank report its environment: every
// tricky value, and variables named like the wrapper's own, arrive exactly,
// however many there are.
func TestSSHEnvRoundTrip(t *testing.T) {
	forEachSSHTarget(t, func(t *testing.T, tg sshTarget) {
		want := map[string]string{}
		environ := []string{"PATH=" + os.Getenv("PATH")}
		for i, v := range sshTrickyValues {
			name := "TRICKY_" + strconv.Itoa(i)
			want[name] = v
			environ = append(environ, name+"="+v)
		}
		for _, name := range []string{"gorovod_grace", "gorovod_dir", "gorovod_n", "gorovod_k", "gorovod_name",
			"gorovod_value", "gorovod_line", "gorovod_nl", "gorovod_tag", "gorovod_watch", "gorovod_status",
			"gorovod_path", "gorovod_sig", "gorovod_bad"} {
			want[name] = "clobbered " + name
			environ = append(environ, name+"="+want[name])
		}
		for i := range 200 {
			name := "MANY_" + strconv.Itoa(i)
			want[name] = strconv.Itoa(i)
			environ = append(environ, name+"="+want[name])
		}
		tg.cfg.ForwardEnv = []string{"X_EMPTY=", "X_SPACES= a  b ", "X_NEWLINES=\n\nx\n"}
		want["X_EMPTY"], want["X_SPACES"], want["X_NEWLINES"] = "", " a  b ", "\n\nx\n"
		dir := t.TempDir()
		envFile, stop := filepath.Join(dir, "env"), filepath.Join(dir, "stop")
		if err := os.WriteFile(stop, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		c := sshShCommand(sshEnvRank, filepath.Join(dir, "pid"), envFile, stop)
		c.Env = []string{"GOROVOD_RANK=5", "GOROVOD_TRICKY=" + sshTrickyValues[len(sshTrickyValues)-2]}
		want["GOROVOD_TRICKY"] = sshTrickyValues[len(sshTrickyValues)-2]
		r := spawnSSH(t, tg, c, environ)
		if err := r.waitExit(t, 20*time.Second); err != nil {
			t.Fatalf("Wait: %v", err)
		}
		got := sshReadEnv0(t, envFile)
		for name, value := range want {
			if v, ok := got[name]; !ok || v != value {
				t.Errorf("the rank has %s=%q (set: %v), want %q", name, clip(v, 80), ok, clip(value, 80))
			}
		}
		if r.stderr.String() != "" {
			t.Errorf("stderr: %s", r.stderr)
		}
	})
}

// sshCmdlines returns the command line of every process that it can read,
// by pid.
func sshCmdlines() map[int][]byte {
	entries, _ := os.ReadDir("/proc")
	out := make(map[int][]byte, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil {
			out[pid] = b
		}
	}
	return out
}

// sshReadEnv0 waits for the env -0 output in path, for at most
// sshTestStart, and returns it as a map.
func sshReadEnv0(t *testing.T, path string) map[string]string {
	t.Helper()
	deadline := time.Now().Add(sshTestStart)
	b, err := os.ReadFile(path)
	for err != nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		b, err = os.ReadFile(path)
	}
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00") {
		name, value, _ := strings.Cut(kv, "=")
		env[name] = value
	}
	return env
}
