package main

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"github.com/urfave/cli/v2"
)

// exitStatusLead starts the paragraph of the app's Description that the
// manual page moves to its EXIT STATUS section.
const exitStatusLead = "Exit status:"

// envHint finds the variables that a flag's help names as [$NAME] (or
// [$NAME, remark]).
var envHint = regexp.MustCompile(`\[\$([A-Za-z_][A-Za-z0-9_]*)([^\]]*)\]`)

// manPage prints gorun's manual page (roff, section 1), made from the app:
// its usage, description and flags.
func manPage(w io.Writer, app *cli.App) error {
	flags, err := appFlags(app)
	if err != nil {
		return err
	}
	var m roff
	m.comment(fmt.Sprintf("Manual page of %s, generated from its flags by %s --man.", app.Name, app.Name))
	m.macro("TH", strings.ToUpper(app.Name), "1", "", strings.TrimSpace(app.Name+" "+app.Version), "User Commands")

	m.macro("SH", "NAME")
	m.text(escape(app.Name) + ` \- ` + escape(app.Usage))

	m.macro("SH", "SYNOPSIS")
	m.macro("nf")
	for _, line := range strings.Split(strings.TrimSpace(app.UsageText), "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, app.Name+" "); ok {
			m.text(`\fB` + escape(app.Name) + `\fR ` + escape(rest))
		} else {
			m.text(escape(line))
		}
	}
	m.macro("fi")

	m.macro("SH", "DESCRIPTION")
	m.text(escape(sentence(app.Usage)))
	var exitStatus string
	for _, para := range paragraphs(app.Description) {
		if rest, ok := strings.CutPrefix(para, exitStatusLead); ok {
			exitStatus = strings.TrimSpace(rest)
			continue
		}
		m.macro("PP")
		m.lines(para)
	}

	m.macro("SH", "OPTIONS")
	categories, byCategory := flagsByCategory(flags)
	for _, c := range categories {
		if c != "" {
			m.macro("SS", c)
		}
		for _, f := range byCategory[c] {
			m.macro("TP")
			m.text(manFlagNames(f))
			m.lines(manFlagText(f))
		}
	}

	if exitStatus != "" {
		m.macro("SH", "EXIT STATUS")
		m.lines(exitStatus)
	}

	if env := manEnvironment(flags); len(env) > 0 {
		m.macro("SH", "ENVIRONMENT")
		m.text("These variables set the flags named below them where the command line does not (DESCRIPTION gives the order).")
		for _, e := range env {
			m.macro("TP")
			m.text(`\fB` + escape(e.name) + `\fR`)
			m.text(e.text)
		}
	}

	m.macro("SH", "SEE ALSO")
	m.text(`\fB` + escape(app.Name) + ` \-\-help\fR,`)
	m.macro("BR", "mpirun", "(1),")
	m.macro("BR", "srun", "(1),")
	m.macro("BR", "ssh", "(1)")

	_, err = io.WriteString(w, m.String())
	return err
}

// manFlagNames is the tag line of f's entry: its names, bold, and its
// value placeholder, italic ("..." after it for a flag that can be given
// more than once).
func manFlagNames(f flagInfo) string {
	names := make([]string, len(f.names))
	for i, n := range f.names {
		names[i] = `\fB` + escape(n) + `\fR`
	}
	s := strings.Join(names, ", ")
	if f.kind != kindNone {
		s += ` \fI` + escape(f.value) + `\fR`
		if f.repeat {
			s += " ..."
		}
	}
	return s
}

// manFlagText is f's help text with its default, as --help shows them.
func manFlagText(f flagInfo) string {
	s := f.usage
	if f.def != "" {
		s += " (default: " + f.def + ")"
	}
	if d, ok := f.flag.(cli.DocGenerationFlag); ok && len(d.GetEnvVars()) > 0 {
		s += " [$" + strings.Join(d.GetEnvVars(), ", $") + "]"
	}
	return strings.TrimSpace(s)
}

// envEntry is a variable of the ENVIRONMENT section, with its roff text.
type envEntry struct{ name, text string }

// manEnvironment lists the variables that set flags: those that the flags'
// help shows as [$NAME], and their EnvVars, sorted by name.
func manEnvironment(flags []flagInfo) []envEntry {
	seen := map[string]bool{}
	var out []envEntry
	add := func(name, remark string, f flagInfo) {
		if seen[name] {
			return
		}
		seen[name] = true
		out = append(out, envEntry{name, `\fB` + escape(f.names[0]) + `\fR` + escape(remark)})
	}
	for _, f := range flags {
		if !f.visible {
			continue
		}
		for _, m := range envHint.FindAllStringSubmatch(f.usage, -1) {
			add(m[1], m[2], f)
		}
		if d, ok := f.flag.(cli.DocGenerationFlag); ok {
			for _, v := range d.GetEnvVars() {
				add(v, "", f)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// paragraphs splits text at its blank lines, each paragraph trimmed.
func paragraphs(text string) []string {
	var out []string
	for _, p := range regexp.MustCompile(`\n[ \t]*\n`).Split(text, -1) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// sentence returns s with its first letter upper case and a full stop.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToUpper(r[0])
	s = string(r)
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// roff builds a roff document.
type roff struct{ strings.Builder }

// comment adds a comment line.
func (r *roff) comment(s string) { r.WriteString(`.\" ` + strings.ReplaceAll(s, "\n", " ") + "\n") }

// macro adds a request line: .name with args, quoted.
func (r *roff) macro(name string, args ...string) {
	r.WriteString("." + name)
	for _, a := range args {
		r.WriteString(` "` + strings.ReplaceAll(escape(a), `"`, `\(dq`) + `"`)
	}
	r.WriteString("\n")
}

// text adds s, already escaped, as text lines: a line that would start
// with a control character (a dot or an apostrophe) starts with \& instead.
func (r *roff) text(s string) {
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if line[0] == '.' || line[0] == '\'' {
			line = `\&` + line
		}
		r.WriteString(line + "\n")
	}
}

// lines escapes s and adds it as text, line by line; roff fills them into
// paragraphs.
func (r *roff) lines(s string) { r.text(escape(s)) }

// optionWord matches a word that is a flag (-H, --min-np) or starts with
// dashes (--, -), whose hyphens roff must set as minus signs.
var optionWord = regexp.MustCompile(`(^|[\s(\[/"'])--?([A-Za-z][A-Za-z0-9-]*)?`)

// escape makes plain text roff text: backslashes printed as such, the
// hyphens of flags as minus signs, characters beyond ASCII as \[uXXXX].
// Control characters at the start of a line are left to roff.text.
func escape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = optionWord.ReplaceAllStringFunc(s, func(m string) string {
		return strings.ReplaceAll(m, "-", `\-`)
	})
	var b strings.Builder
	for _, c := range s {
		switch {
		case c == '\t':
			b.WriteByte(' ')
		case c < 0x80:
			b.WriteRune(c)
		default:
			fmt.Fprintf(&b, `\[u%04X]`, c)
		}
	}
	return b.String()
}
