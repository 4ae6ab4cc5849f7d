package shellquote

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// cases are words that a shell must read back unchanged.
var cases = []string{
	"", " ", "plain", "two words", "it's", "'", "''", `"double"`, "$HOME", "${x:-y}", "$(id)", "`id`",
	`back\slash`, `\`, `\'`, "new\nline", "tab\there", "*", "?", "[a]", "~", "~user", "a=b", "-n", "--",
	"!", "#comment", "a;b", "a|b", "a&b", "(x)", "{x}", "<x>", "é ü 世界", "\x01\x7f\xff", "%s%%", "trailing\n",
}

func TestQuoteExact(t *testing.T) {
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
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestQuoteRoundTrip has /bin/sh read quoted words back.
func TestQuoteRoundTrip(t *testing.T) {
	words := make([]string, len(cases))
	for i, s := range cases {
		words[i] = Quote(s)
	}
	// One word per NUL-terminated record, so that newlines survive.
	out, err := exec.Command("/bin/sh", "-c", `printf '%s\0' `+strings.Join(words, " ")).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if !slices.Equal(got, cases) {
		t.Errorf("round trip through sh:\n got %q\nwant %q", got, cases)
	}
}

func FuzzQuote(f *testing.F) {
	for _, s := range cases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.Contains(s, "\x00") {
			t.Skip("no shell word holds a NUL byte")
		}
		out, err := exec.Command("/bin/sh", "-c", `printf '%s' `+Quote(s)).Output()
		if err != nil {
			t.Fatalf("sh: %v", err)
		}
		if string(out) != s {
			t.Errorf("sh read %q back as %q (quoted %q)", s, out, Quote(s))
		}
	})
}
