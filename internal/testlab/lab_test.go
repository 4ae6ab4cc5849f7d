package testlab_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testlab"
)

// cmdTimeout bounds one command of a test: generous, for a loaded machine.
const cmdTimeout = 2 * time.Minute

// helperEnv, set to an address, makes the test binary dial it and print
// the first line it receives.
const helperEnv = "TESTLAB_DIAL"

func TestMain(m *testing.M) {
	if addr := os.Getenv(helperEnv); addr != "" {
		if err := dial(addr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// dial connects to addr, retrying for 30 s, and prints the first line it
// receives.
func dial(addr string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err == nil {
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
			line, err := bufio.NewReader(conn).ReadString('\n')
			if err != nil {
				return err
			}
			fmt.Print(line)
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// output runs cmd and returns its standard output, failing t with both
// outputs when it fails.
func output(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(cmd.Args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// ssh returns a command that runs script on host as root over ssh with the
// lab's options.
func ssh(ctx context.Context, l *testlab.Lab, host int, script string) *exec.Cmd {
	return exec.CommandContext(ctx, "ssh", append(l.SSHArgs(), "root@"+l.Hosts[host].Addr, script)...)
}

func TestHosts(t *testing.T) {
	t.Parallel()
	l := testlab.Start(t, testlab.Options{Hosts: 2, Rate: "2gbit"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*cmdTimeout)
	defer cancel()

	_, subnet, err := net.ParseCIDR(l.Subnet)
	if err != nil || !subnet.Contains(net.ParseIP(l.BridgeAddr)) {
		t.Fatalf("bridge address %s not in subnet %s (%v)", l.BridgeAddr, l.Subnet, err)
	}
	if len(l.Hosts) != 2 {
		t.Fatalf("hosts %+v", l.Hosts)
	}
	for i, h := range l.Hosts {
		if want := "host" + strconv.Itoa(i+1); h.Name != want || !subnet.Contains(net.ParseIP(h.Addr)) || h.Addr == l.BridgeAddr {
			t.Errorf("host %d: %+v, want %s with its own address in %s", i, h, want, l.Subnet)
		}
	}

	t.Run("ssh", func(t *testing.T) {
		for i, h := range l.Hosts {
			out := output(t, ssh(ctx, l, i, "hostname; ip -4 -o addr show dev eth0"))
			if !strings.HasPrefix(out, h.Name+"\n") || !strings.Contains(out, " "+h.Addr+"/24 ") {
				t.Errorf("ssh to %s (%s) says:\n%s", h.Name, h.Addr, out)
			}
			for _, other := range l.Hosts {
				if other.Addr != h.Addr && strings.Contains(out, " "+other.Addr+"/") {
					t.Errorf("%s has %s's address:\n%s", h.Name, other.Name, out)
				}
			}
			// The wrapper that gorun gets through PATH, and the names
			// of the lab's hosts file inside the sessions.
			out = output(t, exec.CommandContext(ctx, l.SSHCommand(), "root@"+h.Addr, "getent hosts host1 host2 launcher"))
			for _, want := range []string{l.Hosts[0].Addr + " ", l.Hosts[1].Addr + " ", l.BridgeAddr + " "} {
				if !strings.Contains(out, want) {
					t.Errorf("getent hosts on %s lacks %q:\n%s", h.Name, want, out)
				}
			}
		}
	})

	t.Run("reach", func(t *testing.T) {
		// Every host reaches the test process on the bridge's address,
		// and the other host's sshd.
		ln, err := net.Listen("tcp", net.JoinHostPort(l.BridgeAddr, "0"))
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				fmt.Fprintf(conn, "launcher here\n")
				conn.Close()
			}
		}()
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		for i := range l.Hosts {
			cmd := l.Command(ctx, i, exe)
			cmd.Env = append(os.Environ(), helperEnv+"="+ln.Addr().String())
			if out := output(t, cmd); out != "launcher here\n" {
				t.Errorf("host %d dialling the bridge got %q", i, out)
			}
			other := l.Hosts[1-i].Addr
			cmd = ssh(ctx, l, i, helperEnv+"="+other+":22 "+exe)
			if out := output(t, cmd); !strings.HasPrefix(out, "SSH-") {
				t.Errorf("host %d dialling %s:22 got %q", i, other, out)
			}
		}
	})

	t.Run("rate", func(t *testing.T) {
		checkRate(t, ctx, l, "rate 2Gbit")
		if err := l.SetRate("", "", ""); err != nil {
			t.Fatal(err)
		}
		checkRate(t, ctx, l, "")
		if err := l.SetRate("100mbit", "", ""); err != nil {
			t.Fatal(err)
		}
		checkRate(t, ctx, l, "rate 100Mbit")
	})

	t.Run("private /dev/shm", func(t *testing.T) {
		name := "testlab-probe-" + l.ID
		out := output(t, ssh(ctx, l, 0, "touch /dev/shm/"+name+" && ls /dev/shm"))
		if strings.TrimSpace(out) != name {
			t.Errorf("host1's /dev/shm holds %q, want only %s", out, name)
		}
		if _, err := os.Stat("/dev/shm/" + name); err == nil {
			t.Errorf("/dev/shm/%s of host1 is in the machine's /dev/shm", name)
		}
		if out := output(t, ssh(ctx, l, 1, "ls /dev/shm")); strings.TrimSpace(out) != "" {
			t.Errorf("host2's /dev/shm holds %q", out)
		}
	})

	t.Run("reap", func(t *testing.T) {
		marker := "297." + strconv.Itoa(os.Getpid()%1000)
		output(t, ssh(ctx, l, 1, "sleep "+marker+" </dev/null >/dev/null 2>&1 &"))
		eventually(t, "sleep on host2", func() bool { return len(running(is("sleep "+marker))) == 1 })
		if left := l.Reap(); len(left) > 0 {
			t.Errorf("Reap left %v", left)
		}
		eventually(t, "end of the sleep on host2", func() bool { return len(running(is("sleep "+marker))) == 0 })
		output(t, ssh(ctx, l, 1, "true")) // sshd lives on
	})
}

// checkRate checks that both ends of every link have a tbf root queueing
// discipline with want ("rate 2Gbit"), or none when want is "".
func checkRate(t *testing.T, ctx context.Context, l *testlab.Lab, want string) {
	t.Helper()
	for i, h := range l.Hosts {
		ends := map[string]string{
			h.Veth + " (root namespace)": output(t, exec.CommandContext(ctx, "tc", "qdisc", "show", "dev", h.Veth)),
			h.Name + "'s eth0":           output(t, l.Command(ctx, i, "tc", "qdisc", "show", "dev", "eth0")),
		}
		for end, out := range ends {
			has := strings.Contains(out, "qdisc tbf ")
			if want == "" && has || want != "" && !(has && strings.Contains(out, " "+want+" ")) {
				t.Errorf("%s: %q, want tbf with %q", end, out, want)
			}
		}
	}
}

func TestTeardownLeavesNothing(t *testing.T) {
	t.Parallel()
	marker := "296." + strconv.Itoa(os.Getpid()%1000)
	var l *testlab.Lab
	var client *exec.Cmd
	t.Run("lab", func(t *testing.T) {
		l = testlab.Start(t, testlab.Options{Hosts: 2, Rate: "1gbit"})
		ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
		defer cancel()
		// Left running at the end: a session's background process, an
		// ssh session, and a command in a namespace.
		output(t, ssh(ctx, l, 0, "sleep "+marker+" </dev/null >/dev/null 2>&1 &"))
		client = ssh(context.Background(), l, 1, "sleep "+marker)
		if err := client.Start(); err != nil {
			t.Fatal(err)
		}
		inNS := l.Command(context.Background(), 1, "sleep", marker)
		if err := inNS.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = inNS.Wait() }()
		eventually(t, "3 sleeps", func() bool { return len(running(is("sleep "+marker))) == 3 })
	})
	if l == nil {
		t.Skip("no lab")
	}
	done := make(chan error, 1)
	go func() { done <- client.Wait() }()
	select {
	case <-done:
	case <-time.After(cmdTimeout):
		t.Errorf("the ssh client left running is still running %v after teardown", cmdTimeout)
	}
	checkGone(t, l.ID, l.Dir)
	if left := running(is("sleep " + marker)); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
}

// checkGone checks that nothing of the lab id, whose directory was dir, is
// left: no process that names dir (sshd, ssh clients), no namespace, link
// or directory.
func checkGone(t *testing.T, id, dir string) {
	t.Helper()
	// ssh clients of the lab's sessions exit once their sessions are
	// gone: soon, not at once.
	eventually(t, "no process naming "+dir, func() bool { return len(running(containing(dir))) == 0 })
	var left []string
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if strings.Contains(e.Name(), id) {
			left = append(left, "namespace "+e.Name())
		}
	}
	links, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, link := range links {
		if strings.Contains(link.Name, id) {
			left = append(left, "link "+link.Name)
		}
	}
	if _, err := os.Lstat(dir); err == nil {
		left = append(left, "directory "+dir)
	}
	if len(left) > 0 {
		t.Errorf("lab %s left: %s", id, strings.Join(left, ", "))
	}
}

// crashEnv, set, makes TestDeadOwnerLeftoversRemoved start a lab and die
// without its cleanups.
const crashEnv = "TESTLAB_CRASH"

func TestDeadOwnerLeftoversRemoved(t *testing.T) {
	marker := "295." + strconv.Itoa(os.Getpid()%1000)
	if os.Getenv(crashEnv) != "" {
		l := testlab.Start(t, testlab.Options{Hosts: 2})
		ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
		defer cancel()
		output(t, ssh(ctx, l, 0, "sleep "+os.Getenv(crashEnv)+" </dev/null >/dev/null 2>&1 &"))
		if err := ssh(context.Background(), l, 1, "sleep "+os.Getenv(crashEnv)).Start(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "2 sleeps", func() bool { return len(running(is("sleep "+os.Getenv(crashEnv)))) == 2 })
		fmt.Printf("lab %s %s\n", l.ID, l.Dir)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(exe, "-test.run=^TestDeadOwnerLeftoversRemoved$", "-test.count=1")
	child.Env = append(os.Environ(), crashEnv+"="+marker)
	out, err := child.Output()
	var id, dir string
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "lab "); ok {
			id, dir, _ = strings.Cut(rest, " ")
		}
	}
	if id == "" || dir == "" {
		if strings.Contains(string(out), "SKIP") {
			t.Skipf("the child skipped:\n%s", out)
		}
		t.Fatalf("the child (%v) printed no lab:\n%s", err, out)
	}
	// The sshds die with their owner; the sessions' processes do not
	// (unless the next Start of another test process on the machine has
	// already collected them).
	eventually(t, "end of the dead owner's sshds", func() bool { return len(running(containing("sshd -D -e -f "+dir))) == 0 })
	if left := running(is("sleep " + marker)); len(left) == 0 {
		t.Logf("the dead owner's sessions are gone already: another process collected lab %s", id)
	}
	// The next Start removes the rest.
	testlab.Start(t, testlab.Options{Hosts: 1})
	checkGone(t, id, dir)
	eventually(t, "end of the sleeps", func() bool { return len(running(is("sleep "+marker))) == 0 })
}

func TestDetachedOutlivesStaleCollection(t *testing.T) {
	if err := testlab.Prerequisites(testlab.Options{}); err != nil {
		testlab.Start(t, testlab.Options{Hosts: 1}) // skips or fails as it should
	}
	d, err := testlab.New(testlab.Options{Hosts: 1, Detached: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if !slices.Contains(testlab.Detached(), d.ID) {
		t.Errorf("Detached() = %v, lacks %s", testlab.Detached(), d.ID)
	}
	// Another lab's start collects stale labs: not this one.
	testlab.Start(t, testlab.Options{Hosts: 1})
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	if out := output(t, ssh(ctx, d, 0, "hostname")); out != "host1\n" {
		t.Errorf("detached lab's host1 says %q", out)
	}
	// The lab command's way: the Lab as JSON, read back in a process
	// that did not make it, closes it.
	data, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var back testlab.Lab
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.ID != d.ID || back.Dir != d.Dir || len(back.Hosts) != 1 || back.Hosts[0] != d.Hosts[0] {
		t.Fatalf("JSON round trip: %+v, want %+v", &back, d)
	}
	if err := back.Close(); err != nil {
		t.Fatal(err)
	}
	checkGone(t, d.ID, d.Dir)
	if slices.Contains(testlab.Detached(), d.ID) {
		t.Errorf("Detached() = %v after Close, still has %s", testlab.Detached(), d.ID)
	}
}

// running returns the processes other than this one whose command line
// (arguments joined by spaces) satisfies match, as "PID: COMMAND LINE".
func running(match func(cmdline string) bool) []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		raw, err := os.ReadFile(filepath.Join(d, "cmdline"))
		pid := filepath.Base(d)
		if err != nil || len(raw) == 0 || pid == strconv.Itoa(os.Getpid()) {
			continue
		}
		if cmdline := strings.TrimSpace(strings.ReplaceAll(string(raw), "\x00", " ")); match(cmdline) {
			found = append(found, pid+": "+cmdline)
		}
	}
	return found
}

// is matches the command line s exactly.
func is(s string) func(string) bool { return func(c string) bool { return c == s } }

// containing matches command lines that contain s.
func containing(s string) func(string) bool {
	return func(c string) bool { return strings.Contains(c, s) }
}

// eventually polls cond every 50 ms for up to a minute, failing t with the
// machine's processes if it never holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	limit := time.After(time.Minute)
	for !cond() {
		select {
		case <-tick.C:
		case <-limit:
			t.Fatalf("no %s within a minute; processes:\n%s", what, strings.Join(running(func(string) bool { return true }), "\n"))
		}
	}
}
