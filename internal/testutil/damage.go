package testutil

import (
	"os"
	"testing"
)

// TruncateHalf cuts the file at path to half its length, as a write that
// stopped midway leaves it.
func TruncateHalf(t testing.TB, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
}

// FlipBit inverts the lowest bit of byte i of the file at path (i < 0
// counts from its end: -1 is the last byte), as a damaged disk might.
func FlipBit(t testing.TB, path string, i int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if i < 0 {
		i += len(b)
	}
	b[i] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
