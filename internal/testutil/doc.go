// Package testutil holds small helpers that the tests of several gorovod
// packages share. It is imported only by tests and test fixtures, never by
// the library or its commands.
package testutil
