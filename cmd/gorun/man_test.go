package main

import (
	"bytes"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/gorovod/gorovod/runner"
)

// manMacros are the requests the manual page may use.
var manMacros = map[string]bool{`\"`: true, "TH": true, "SH": true, "SS": true, "TP": true, "PP": true, "nf": true, "fi": true, "BR": true}

// checkControlLines fails the test for a line of page that starts with a
// control character (a dot or an apostrophe) and is not one of manMacros:
// text that roff would take for a request.
func checkControlLines(t *testing.T, page string) {
	t.Helper()
	for i, line := range strings.Split(page, "\n") {
		if line == "" || (line[0] != '.' && line[0] != '\'') {
			continue
		}
		name := strings.Fields(line[1:] + " ")
		if len(name) == 0 || !manMacros[name[0]] && !strings.HasPrefix(line, `.\"`) {
			t.Errorf("line %d: %q starts with a control character but is no request of the page", i+1, line)
		}
	}
}

// section returns the text of the page's section named name, up to the
// next .SH.
func section(t *testing.T, page, name string) string {
	t.Helper()
	_, after, ok := strings.Cut(page, "\n.SH \""+name+"\"\n")
	if !ok {
		t.Fatalf("the manual page has no section %s", name)
	}
	text, _, _ := strings.Cut(after, "\n.SH ")
	return text
}

// groffWarnings renders page with groff's man macros, every warning on,
// and returns what groff printed (its warnings), or skips the test when
// groff is not installed.
func groffWarnings(t *testing.T, page string) string {
	t.Helper()
	groff := lookTool(t, "groff")
	cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z")
	cmd.Stdin = strings.NewReader(page)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("groff: %v\n%s", err, out)
	}
	return string(out)
}

// groffText renders page as plain text, lines long and no hyphenation, or
// skips the test when groff is not installed.
func groffText(t *testing.T, page string) string {
	t.Helper()
	groff := lookTool(t, "groff")
	cmd := exec.Command(groff, "-man", "-Tutf8", "-P-cbou", "-rLL=300n", "-rHY=0")
	cmd.Stdin = strings.NewReader(page)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("groff: %v\n%s", err, stderr.String())
	}
	// Minus signs print as U+2212 where the system's man.local does not
	// make them ASCII.
	return strings.ReplaceAll(string(out), "\u2212", "-")
}

// TestManPage checks gorun's manual page: its sections, every flag under
// its category's heading, the exit status taken from the app, the
// variables, and no stray control lines.
func TestManPage(t *testing.T) {
	page := appOutput(t, "--man")
	if !strings.HasPrefix(page, `.\"`) || !strings.Contains(page, "\n.TH \"GORUN\" \"1\" ") {
		t.Errorf("the page does not start with a comment and .TH GORUN 1:\n%.300s", page)
	}
	checkControlLines(t, page)

	app := newApp(io.Discard, io.Discard, func(runner.Config) error { return nil })
	if got := section(t, page, "NAME"); got != `gorun \- `+escape(app.Usage) {
		t.Errorf("NAME is %q", got)
	}
	synopsis := section(t, page, "SYNOPSIS")
	for _, line := range strings.Split(app.UsageText, "\n") {
		want := `\fBgorun\fR ` + escape(strings.TrimPrefix(line, "gorun "))
		if !strings.Contains(synopsis, want) {
			t.Errorf("SYNOPSIS lacks %q:\n%s", want, synopsis)
		}
	}

	// The description's exit-status paragraph is the EXIT STATUS section,
	// and not in DESCRIPTION.
	_, exit, ok := strings.Cut(app.Description, exitStatusLead)
	if !ok {
		t.Fatalf("the app's Description has no %q paragraph", exitStatusLead)
	}
	exitSection := section(t, page, "EXIT STATUS")
	for _, line := range strings.Split(strings.TrimSpace(exit), "\n") {
		if !strings.Contains(exitSection, escape(line)) {
			t.Errorf("EXIT STATUS lacks %q:\n%s", line, exitSection)
		}
	}
	description := section(t, page, "DESCRIPTION")
	if strings.Contains(description, "Exit status") || !strings.Contains(description, "Run a gorovod job") {
		t.Errorf("DESCRIPTION:\n%s", description)
	}
	if !strings.Contains(description, `Put \-\- before a program`) {
		t.Errorf("DESCRIPTION: the flags' dashes are not minus signs:\n%s", description)
	}

	// Each flag in its category's subsection, with its placeholder and
	// default as --help shows them.
	options := section(t, page, "OPTIONS")
	subsections := regexp.MustCompile(`(?m)^\.SS "([^"]*)"$`).FindAllStringSubmatchIndex(options, -1)
	categoryAt := func(i int) string {
		c := ""
		for _, s := range subsections {
			if s[0] < i {
				c = options[s[2]:s[3]]
			}
		}
		return c
	}
	seen := map[string]bool{}
	for _, f := range flags() {
		cat := f.(cli.CategorizableFlag).GetCategory()
		if !seen[cat] && !strings.Contains(options, "\n.SS \""+cat+"\"\n") {
			t.Errorf("OPTIONS has no subsection %q", cat)
		}
		seen[cat] = true
		first := `\fB` + strings.ReplaceAll(dashed(f.Names()[0]), "-", `\-`) + `\fR`
		i := strings.Index(options, ".TP\n"+first)
		if i < 0 {
			t.Errorf("OPTIONS has no entry for %s", f.Names()[0])
			continue
		}
		if got := categoryAt(i); got != cat {
			t.Errorf("%s is under %q, want %q", f.Names()[0], got, cat)
		}
	}
	for _, want := range []string{
		`\fB\-\-launcher\fR \fIvalue\fR` + "\nhow ranks start",
		`(default: "auto")`,
		`\fB\-np\fR, \fB\-n\fR, \fB\-\-num\-proc\fR \fIvalue\fR` + "\n",
		`\fB\-\-hosts\fR, \fB\-H\fR \fIvalue\fR ...` + "\n",
		"\n.TP\n" + `\fB\-\-verbose\fR` + "\n",
		`(default: all the slots of \-H or \-hostfile)`,
		`\fB\-\-help\fR, \fB\-h\fR` + "\nshow help",
		`processors \[u00F7] ranks`,
	} {
		if !strings.Contains(options, want) {
			t.Errorf("OPTIONS lacks %q", want)
		}
	}
	if len(subsections) != len(seen) || !strings.HasPrefix(options, ".TP\n") {
		t.Errorf("OPTIONS has %d subsections for %d categories, or does not start with the flags without one (--help)", len(subsections), len(seen))
	}

	// Every variable a flag's help names as [$NAME], with its flag.
	env := section(t, page, "ENVIRONMENT")
	for name, flag := range knobFlags() {
		want := `.TP` + "\n" + `\fB` + name + `\fR` + "\n" + `\fB\-\-` + strings.ReplaceAll(flag, "-", `\-`) + `\fR`
		if !strings.Contains(env, want) {
			t.Errorf("ENVIRONMENT lacks %s with --%s:\n%s", name, flag, env)
		}
	}
	if !strings.Contains(env, `\fB\-\-fusion\-threshold\-mb\fR, in bytes`) {
		t.Errorf("ENVIRONMENT lacks the remark on GOROVOD_FUSION_THRESHOLD")
	}
	section(t, page, "SEE ALSO")

	if w := groffWarnings(t, page); w != "" {
		t.Errorf("groff -man -ww warns:\n%s", w)
	}
	text := groffText(t, page)
	for _, want := range []string{"--launcher value", "-np, -n, --num-proc value", "EXIT STATUS", "processors ÷ ranks", "GOROVOD_START_TIMEOUT"} {
		if !strings.Contains(text, want) {
			t.Errorf("the rendered page lacks %q", want)
		}
	}
}

// TestManEscapes: text that roff would read as requests, escapes or
// non-ASCII comes out as written.
func TestManEscapes(t *testing.T) {
	app := &cli.App{
		Name:        "gorun",
		Usage:       `a\b test`,
		UsageText:   "gorun [flags] program",
		Description: ".TH in text\n'quoted start\nback\\slash \\fB and \\n\n\nExit status: 0\n.always",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dot", Category: "odd \"cat\"", Usage: ".dot start\n'quote start `FILE` [$GOROVOD_DOT]"},
			&cli.BoolFlag{Name: "uni", Usage: "µs → ok, \\e"},
		},
	}
	var b bytes.Buffer
	if err := manPage(&b, app); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	checkControlLines(t, page)
	for _, want := range []string{
		`\&.TH in text`, `\&'quoted start`, `back\eslash \efB and \en`, `\&.dot start`, `\&'quote start FILE`,
		`\fB\-\-dot\fR \fIFILE\fR`, `.SS "odd \(dqcat\(dq"`, `\[u00B5]s \[u2192] ok, \ee`, `a\eb test`,
		"\n.SH \"EXIT STATUS\"\n0\n\\&.always\n", "\\fBGOROVOD_DOT\\fR\n\\fB\\-\\-dot\\fR\n",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	if w := groffWarnings(t, page); w != "" {
		t.Errorf("groff -man -ww warns:\n%s", w)
	}
	text := groffText(t, page)
	for _, want := range []string{".TH in text", "'quoted start", `back\slash \fB and \n`, ".dot start", "'quote start FILE",
		`odd "cat"`, "µs → ok, \\e", `a\b test`, ".always"} {
		if !strings.Contains(text, want) {
			t.Errorf("the rendered page lacks %q:\n%s", want, text)
		}
	}
}
