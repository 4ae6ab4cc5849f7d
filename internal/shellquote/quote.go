package shellquote

import "strings"

// Quote returns s as one word of a POSIX shell command: as it is when
// it holds only characters that are never special (letters, digits and
// _ - . / : , + @ %), otherwise between single quotes, each single quote
// written as quote, backslash, quote, quote:
//
//	it's  ->  'it'\''s'
//	(empty)  ->  two single quotes
//
// s must not hold a NUL byte, which no shell word can carry.
func Quote(s string) string {
	if s != "" && strings.IndexFunc(s, special) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// special reports whether r may need quoting in a shell word.
func special(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return false
	}
	return !strings.ContainsRune("_-./:,+@%", r)
}
