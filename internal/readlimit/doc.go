// Package readlimit reads what comes from outside the program (a config
// file, a cluster spec, a secret file) with a bound: at most one byte past
// the limit is read, so a file over it, or an endless one such as
// /dev/zero, fails at once with memory bounded by the limit.
package readlimit
