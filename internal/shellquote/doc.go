// Package shellquote writes words for a POSIX shell: the one quoting that
// gorun's remote commands (ssh) and the test lab's scripts share.
package shellquote
