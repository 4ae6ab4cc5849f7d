package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/gorovod/gorovod/internal/testenv"
	"github.com/gorovod/gorovod/runner"
)

// appOutput runs gorun's app in this process with args (no program: only
// information flags) and returns what it printed.
func appOutput(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	app := newApp(&stdout, &stderr, func(runner.Config) error {
		t.Fatalf("gorun %q launched a job", args)
		return nil
	})
	if err := app.Run(append([]string{"gorun"}, args...)); err != nil {
		t.Fatalf("gorun %q: %v\nstderr: %s", args, err, stderr.String())
	}
	return stdout.String()
}

// typedFlagNames returns every name of every visible flag of gorun, as
// typed (-np, -H, --hosts), --help and --version included.
func typedFlagNames(t *testing.T) []string {
	t.Helper()
	app := newApp(io.Discard, io.Discard, func(runner.Config) error { return nil })
	app.Setup()
	var names []string
	for _, f := range app.VisibleFlags() {
		for _, n := range f.Names() {
			names = append(names, dashed(n))
		}
	}
	slices.Sort(names)
	for _, want := range []string{"-np", "-n", "--num-proc", "-H", "--hosts", "-x", "--launcher", "--help", "-h", "--completion", "--man"} {
		if !slices.Contains(names, want) {
			t.Fatalf("flag names %q lack %s", names, want)
		}
	}
	return names
}

// TestDashed: names of one or two letters take one dash, as gorun's
// messages write them (-H, -np); longer ones two.
func TestDashed(t *testing.T) {
	for name, want := range map[string]string{"H": "-H", "np": "-np", "x": "-x", "hosts": "--hosts", "num-proc": "--num-proc"} {
		if got := dashed(name); got != want {
			t.Errorf("dashed(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestCompletionChoicesParse: every choice the scripts offer is a value
// the parser takes, and each choice flag's default is one of its choices.
func TestCompletionChoicesParse(t *testing.T) {
	clearKnobEnv(t)
	// A Slurm allocation of one slot, so that --launcher srun is right.
	t.Setenv("SLURM_JOB_ID", "7")
	t.Setenv("SLURM_JOB_NODELIST", "localhost")
	t.Setenv("SLURM_TASKS_PER_NODE", "1")
	t.Setenv("SLURM_JOB_CPUS_PER_NODE", "1")
	byName := map[string]cli.Flag{}
	for _, f := range flags() {
		byName[f.Names()[0]] = f
	}
	if len(flagChoices) < 5 {
		t.Errorf("flagChoices has %d flags, want launcher, bind-to, hierarchical-allreduce, log-level and completion", len(flagChoices))
	}
	for name, choices := range flagChoices {
		f, ok := byName[name]
		if !ok {
			t.Errorf("flagChoices names --%s, which gorun does not have", name)
			continue
		}
		if d, ok := f.(cli.DocGenerationFlag); !ok || !d.TakesValue() {
			t.Errorf("--%s takes no value, yet flagChoices lists values for it", name)
			continue
		}
		if def := f.(cli.DocGenerationFlag).GetValue(); def != "" && !slices.Contains(choices, def) {
			t.Errorf("--%s: the default %q is not among the choices %q", name, def, choices)
		}
		for _, choice := range choices {
			cfg, err := parse(t, "-np", "1", "--"+name, choice, "./train")
			if err != nil {
				t.Errorf("--%s %s: %v", name, choice, err)
				continue
			}
			if name == "completion" {
				continue // prints the script; no job to check
			}
			if err := cfg.Validate(); err != nil {
				t.Errorf("--%s %s: the parsed configuration is not valid: %v", name, choice, err)
			}
		}
	}
}

// TestCompletionUnknownShell: a shell gorun has no script for is a mistake
// on the command line (exit status 2).
func TestCompletionUnknownShell(t *testing.T) {
	app := newApp(io.Discard, io.Discard, func(runner.Config) error { return nil })
	err := completionScript(io.Discard, "fish", app)
	if err == nil || err.Error() != `--completion "fish": want bash or zsh` {
		t.Fatalf("--completion fish: %v", err)
	}
	if exitCode(err) != exitUsage {
		t.Errorf("--completion fish: exit status %d, want %d", exitCode(err), exitUsage)
	}
}

// TestCompletionScriptsNameEveryFlag: every name of every flag is in both
// scripts and in the manual page.
func TestCompletionScriptsNameEveryFlag(t *testing.T) {
	bash, zsh, man := appOutput(t, "--completion", "bash"), appOutput(t, "--completion", "zsh"), appOutput(t, "--man")
	word := func(name string) *regexp.Regexp {
		return regexp.MustCompile(`(^|[^A-Za-z0-9-])` + regexp.QuoteMeta(name) + `([^A-Za-z0-9-]|$)`)
	}
	for _, name := range typedFlagNames(t) {
		if !word(name).MatchString(bash) {
			t.Errorf("the bash script lacks %s", name)
		}
		if !word(name).MatchString(zsh) {
			t.Errorf("the zsh script lacks %s", name)
		}
		if !strings.Contains(man, `\fB`+strings.ReplaceAll(name, "-", `\-`)+`\fR`) {
			t.Errorf("the manual page lacks %s", name)
		}
	}
}

// TestCompletionFromFlags: the scripts follow the app's flags: a flag
// added to the app is in them, with its value completed by its kind.
func TestCompletionFromFlags(t *testing.T) {
	app := newApp(io.Discard, io.Discard, func(runner.Config) error { return nil })
	app.Flags = append(app.Flags,
		&cli.StringFlag{Name: "brand-new-file", TakesFile: true, Usage: "a new file flag"},
		&cli.BoolFlag{Name: "brand-new-bool", Usage: "a new boolean flag"},
		&cli.StringFlag{Name: "brand-new-hidden", Hidden: true},
	)
	var bash, zsh bytes.Buffer
	if err := completionScript(&bash, "bash", app); err != nil {
		t.Fatal(err)
	}
	if err := completionScript(&zsh, "zsh", app); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`flags='[^']* --brand-new-file --brand-new-bool'`,
		`(?m)^\t([^\n]*\|)?brand-new-file(\|[^\n]*)?\) kind=file ;;$`,
		`(?m)^\t([^\n]*\|)?brand-new-bool(\|[^\n]*)?\) kind=none ;;$`,
		`(?m)^\t([^\n]*\|)?brand-new-hidden(\|[^\n]*)?\) kind=value ;;$`,
	} {
		if !regexp.MustCompile(want).MatchString(bash.String()) {
			t.Errorf("the bash script does not match %q", want)
		}
	}
	for _, want := range []string{"'--brand-new-file=[a new file flag]:brand-new-file:_files'", "'--brand-new-bool[a new boolean flag]'"} {
		if !strings.Contains(zsh.String(), want) {
			t.Errorf("the zsh script lacks %q", want)
		}
	}
	if strings.Contains(bash.String(), "--brand-new-hidden") || strings.Contains(zsh.String(), "--brand-new-hidden") {
		t.Errorf("a hidden flag is offered")
	}
}

// lookShell returns the path of shell, or skips the test (fails it where
// test.sh asks for the tools).
func lookShell(t *testing.T, shell string) string {
	t.Helper()
	return lookTool(t, shell)
}

// lookTool returns the path of program, or skips the test without it;
// under GOROVOD_REQUIRE_TOOLS (test.sh, which installs it) a missing
// program fails the test instead.
func lookTool(t *testing.T, program string) string {
	t.Helper()
	path, err := exec.LookPath(program)
	switch {
	case err == nil:
		return path
	case testenv.Required(testenv.RequireTools):
		t.Fatalf("no %s here, and %s is set: %v", program, testenv.RequireTools, err)
	}
	t.Skipf("no %s here (test.sh installs it): %v", program, err)
	return ""
}

// writeScript writes gorun's completion script for shell into a new
// directory, named name, and returns its path.
func writeScript(t *testing.T, shell, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(appOutput(t, "--completion", shell)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runShell runs the shell script code with args in dir and returns its
// standard output; it fails the test on a non-zero exit or on anything on
// standard error.
func runShell(t *testing.T, dir string, env []string, argv ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Fatalf("%q: %v\nstdout:\n%s\nstderr:\n%s", argv, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// bashHarness loads the script given as $1 into a bash without any
// start-up files, sets the completion variables as bash does for the
// words $3..., the cursor at the end of the line $2, calls the completion
// function and prints COMPREPLY, one per line.
const bashHarness = `source "$1" || exit
COMP_LINE=$2
COMP_POINT=${#COMP_LINE}
shift 2
COMP_WORDS=("$@")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
complete -p gorun >/dev/null || exit
_gorun gorun "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" || exit
for r in "${COMPREPLY[@]}"; do printf '%s\n' "$r"; done
`

// TestBashCompletion completes command lines with the bash script, as bash
// would: its words split at COMP_WORDBREAKS characters too (= and :).
func TestBashCompletion(t *testing.T) {
	bash := lookShell(t, "bash")
	script := writeScript(t, "bash", "gorun.bash")
	runShell(t, t.TempDir(), nil, bash, "-n", script)

	dir := t.TempDir() // the current directory: the files to complete
	for _, name := range []string{"hosts.txt", "train"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	// bash completes host names from $HOSTFILE when it is set.
	hostsFile := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hostsFile, []byte("10.0.0.1 alpha-node\n10.0.0.2 beta-node\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOSTFILE=" + hostsFile, "LC_ALL=C"}

	names := typedFlagNames(t)
	var twoDashes []string
	for _, n := range names {
		if strings.HasPrefix(n, "--") {
			twoDashes = append(twoDashes, n)
		}
	}
	files := []string{"hosts.txt", "sub", "train"}
	for _, c := range []struct {
		line  string
		words []string // as bash splits line; nil: at blanks
		want  []string
	}{
		{line: "gorun --la", want: []string{"--launcher"}},
		{line: "gorun -", want: names},
		{line: "gorun --", want: twoDashes},
		{line: "gorun -np 2 --ver", want: []string{"--verbose", "--version"}},
		{line: "gorun --launcher ", want: []string{"auto", "local", "ssh", "srun"}},
		{line: "gorun --bind-to c", want: []string{"core"}},
		{line: "gorun --hierarchical-allreduce o", want: []string{"off", "on"}},
		{line: "gorun --log-level ", want: []string{"debug", "error", "info", "warn"}},
		{line: "gorun --completion ", want: []string{"bash", "zsh"}},
		{line: "gorun -np 4 --launcher ", want: []string{"auto", "local", "ssh", "srun"}},
		{line: "gorun --launcher=ss", words: []string{"gorun", "--launcher", "=", "ss"}, want: []string{"ssh"}},
		{line: "gorun --launcher=", words: []string{"gorun", "--launcher", "="}, want: []string{"auto", "local", "ssh", "srun"}},
		{line: "gorun -launcher l", want: []string{"local"}},
		{line: "gorun --verbose=", words: []string{"gorun", "--verbose", "="}, want: []string{"false", "true"}},
		{line: "gorun --hostfile ", want: files},
		{line: "gorun --hostfile h", want: []string{"hosts.txt"}},
		{line: "gorun --hostfile=h", words: []string{"gorun", "--hostfile", "=", "h"}, want: []string{"hosts.txt"}},
		{line: "gorun -i ", want: files},
		{line: "gorun -H al", want: []string{"alpha-node"}},
		// bash's word is "2,be", after the colon: the reply replaces it.
		{line: "gorun -H alpha-node:2,be", words: []string{"gorun", "-H", "alpha-node", ":", "2,be"}, want: []string{"2,beta-node"}},
		{line: "gorun -H alpha-node:2 --la", words: []string{"gorun", "-H", "alpha-node", ":", "2", "--la"}, want: []string{"--launcher"}},
		{line: "gorun -x A=1 --la", words: []string{"gorun", "-x", "A", "=", "1", "--la"}, want: []string{"--launcher"}},
		{line: "gorun -np ", want: nil},
		{line: "gorun --start-timeout 3", want: nil},
		// The program and its arguments: files (and commands), never
		// gorun's flags.
		{line: "gorun -np 4 ./train --ep", want: nil},
		{line: "gorun -np 4 ./train --", want: nil},
		{line: "gorun -np 4 ./train -", want: nil},
		{line: "gorun -np 4 ./train --launcher ", want: files},
		{line: "gorun -np 4 ./train h", want: []string{"hosts.txt"}},
		{line: "gorun --verbose ./train ", want: files},
		{line: "gorun -np 4 ./tr", want: []string{"./train"}},
		{line: "gorun -- --", want: nil},
		{line: "gorun -- -np", want: nil},
		{line: "gorun -- ./train --la", want: nil},
	} {
		words := c.words
		if words == nil {
			words = strings.Split(c.line, " ")
		}
		argv := append([]string{bash, "--norc", "--noprofile", "-c", bashHarness, "bash", script, c.line}, words...)
		out := runShell(t, dir, env, argv...)
		got := strings.Fields(out)
		slices.Sort(got)
		want := slices.Clone(c.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%q<TAB>: got %q, want %q", c.line, got, want)
		}
	}
}

// TestBashCompletionProgramCommands: in the program's place, commands are
// offered too, and no flag of gorun.
func TestBashCompletionProgramCommands(t *testing.T) {
	bash := lookShell(t, "bash")
	script := writeScript(t, "bash", "gorun.bash")
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "zz-gorun-test-tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}
	for _, line := range []string{"gorun zz-gorun", "gorun -np 2 zz-gorun", "gorun -- zz-gorun"} {
		argv := append([]string{bash, "--norc", "--noprofile", "-c", bashHarness, "bash", script, line}, strings.Split(line, " ")...)
		got := strings.Fields(runShell(t, t.TempDir(), env, argv...))
		if !slices.Equal(got, []string{"zz-gorun-test-tool"}) {
			t.Errorf("%q<TAB>: got %q, want the command zz-gorun-test-tool", line, got)
		}
	}
}

// zshSpecs loads the zsh script with _arguments replaced by a function
// that prints its arguments, one per line, as zsh passes them (quoting
// and braces expanded), and returns them.
func zshSpecs(t *testing.T, zsh, script string) []string {
	t.Helper()
	out := runShell(t, t.TempDir(), nil, zsh, "-f", "-c",
		`compdef() { print -r -- "compdef $*" }
_arguments() { print -rl -- "$@" }
source "$1" && _gorun`, "zsh", script)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) < 5 || lines[0] != "compdef _gorun gorun" {
		t.Fatalf("sourcing the zsh script printed\n%s", out)
	}
	return lines[1:]
}

// zshSpecName matches an _arguments option specification: an optional
// exclusion list, * when repeatable, the name, = when it takes a value,
// the description, then :message:action for the value.
var zshSpecName = regexp.MustCompile(`^(\([^)]*\))?(\*)?(-{1,2}[A-Za-z0-9][A-Za-z0-9-]*)(=?)\[((?:[^\]\\]|\\.)*)\](.*)$`)

// TestZshCompletion checks the zsh script: its syntax, the _arguments
// specifications it passes (every flag; the choices, files and hosts of
// the flags that take them; no gorun flag from the program on), and that
// compinit finds it in $fpath.
func TestZshCompletion(t *testing.T) {
	zsh := lookShell(t, "zsh")
	script := writeScript(t, "zsh", "_gorun")
	runShell(t, t.TempDir(), nil, zsh, "-n", script)
	args := zshSpecs(t, zsh, script)

	if !slices.Equal(args[:4], []string{"-S", "-A", "-*", ":"}) {
		t.Errorf("_arguments options %q, want -S (no flags after --) and -A '-*' (none after the program)", args[:4])
	}
	specs := map[string]string{} // option name -> what follows it
	var rest []string
	for _, a := range args[4:] {
		m := zshSpecName.FindStringSubmatch(a)
		if m == nil {
			rest = append(rest, a)
			continue
		}
		if _, dup := specs[m[3]]; dup {
			t.Errorf("two specifications for %s", m[3])
		}
		specs[m[3]] = m[4] + "[" + m[5] + "]" + m[6]
	}
	if !slices.Equal(rest, []string{"(-)1:program:_command_names -e", "*::program argument:_normal"}) {
		t.Errorf("the specifications for the program and its arguments are %q", rest)
	}
	var got []string
	for name := range specs {
		got = append(got, name)
	}
	slices.Sort(got)
	if names := typedFlagNames(t); !slices.Equal(got, names) {
		t.Errorf("zsh specifications for %q, want %q", got, names)
	}

	values := map[string]string{
		"--launcher":               ":launcher:(auto local ssh srun)",
		"--bind-to":                ":bind-to:(core none)",
		"--hierarchical-allreduce": ":hierarchical-allreduce:(auto on off)",
		"--log-level":              ":log-level:(debug info warn error)",
		"--completion":             ":completion:(bash zsh)",
		"--hostfile":               ":hostfile:_files",
		"--config-file":            ":config-file:_files",
		"-i":                       ":ssh-identity-file:_files",
		"-H":                       ":hosts:_sequence _hosts",
		"-np":                      ":np: ",
		"--num-proc":               ":np: ",
		"--verbose":                "",
		"--help":                   "",
	}
	for name, want := range values {
		spec := specs[name]
		takesValue := strings.HasPrefix(spec, "=")
		if takesValue != (want != "") {
			t.Errorf("%s: specification %q: takes a value %v, want %v", name, spec, takesValue, want != "")
		}
		if !strings.HasSuffix(spec, "]"+want) {
			t.Errorf("%s: specification %q, want the value completed by %q", name, spec, want)
		}
	}
	if !strings.Contains(specs["--bind-to"], `host'\''s`) && !strings.Contains(specs["--bind-to"], `host's`) {
		t.Errorf("--bind-to: description %q lost its apostrophe", specs["--bind-to"])
	}

	// compinit finds the script in $fpath and binds it to gorun; sourced
	// after compinit, it binds itself.
	fpath := filepath.Dir(script)
	home := t.TempDir()
	out := runShell(t, home, []string{"HOME=" + home, "ZDOTDIR=" + home}, zsh, "-f", "-c",
		`fpath=("$1" $fpath); autoload -Uz compinit && compinit -u -D && print -r -- "$_comps[gorun]"`, "zsh", fpath)
	if strings.TrimSpace(out) != "_gorun" {
		t.Errorf("after compinit with the script in $fpath, gorun completes with %q, want _gorun", out)
	}
	out = runShell(t, home, []string{"HOME=" + home, "ZDOTDIR=" + home}, zsh, "-f", "-c",
		`autoload -Uz compinit && compinit -u -D && source "$1" && print -r -- "$_comps[gorun]"`, "zsh", script)
	if strings.TrimSpace(out) != "_gorun" {
		t.Errorf("after source, gorun completes with %q, want _gorun", out)
	}
}

// TestZshDescriptionsQuoted: help texts with quotes, brackets, colons,
// backslashes and dollars come through the zsh quoting as written.
func TestZshDescriptionsQuoted(t *testing.T) {
	zsh := lookShell(t, "zsh")
	app := &cli.App{Name: "gorun", Flags: []cli.Flag{
		&cli.StringFlag{Name: "odd", Usage: `it's [odd]: a\b $HOME "q"`},
	}}
	var b bytes.Buffer
	if err := completionScript(&b, "zsh", app); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "_gorun")
	if err := os.WriteFile(script, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	runShell(t, t.TempDir(), nil, zsh, "-n", script)
	args := zshSpecs(t, zsh, script)
	want := `--odd=[it's \[odd\]\: a\\b $HOME "q"]:odd: `
	if !slices.Contains(args, want) {
		t.Errorf("specifications %q, want %q among them", args, want)
	}
}

// TestCompletionBadFlagName: a flag name that cannot go into a script
// unquoted is an error, not a broken script.
func TestCompletionBadFlagName(t *testing.T) {
	app := &cli.App{Name: "gorun", Flags: []cli.Flag{&cli.BoolFlag{Name: "bad'name"}}}
	for _, shell := range completionShells {
		if err := completionScript(io.Discard, shell, app); err == nil {
			t.Errorf("%s: no error for the flag name bad'name", shell)
		}
	}
}

// TestGorunCompletionAndMan runs the gorun binary: the scripts and the
// manual page print with exit status 0 and no program; an unknown shell
// exits 2 with one message.
func TestGorunCompletionAndMan(t *testing.T) {
	for _, c := range []struct {
		args   []string
		code   int
		stdout string // its start
		stderr string
	}{
		{args: []string{"--completion", "bash"}, stdout: "# bash completion for gorun"},
		{args: []string{"--completion", "zsh"}, stdout: "#compdef gorun\n"},
		{args: []string{"--man"}, stdout: `.\" Manual page of gorun`},
		{args: []string{"--completion", "fish"}, code: exitUsage, stderr: "gorun: --completion \"fish\": want bash or zsh\n"},
	} {
		r := runGorun(t, c.args...)
		if r.code != c.code || !strings.HasPrefix(r.stdout, c.stdout) || r.stderr != c.stderr ||
			(c.stdout == "") != (r.stdout == "") {
			t.Errorf("gorun %q: exit status %d, stdout %.80q..., stderr %q; want %d, stdout starting %q, stderr %q",
				c.args, r.code, r.stdout, r.stderr, c.code, c.stdout, c.stderr)
		}
	}
}
