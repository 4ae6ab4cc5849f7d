package readlimit

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestFile: a file of exactly the limit is read whole; one byte more, or an
// endless file, is ErrTooLarge; a missing file is the open's error.
func TestFile(t *testing.T) {
	dir := t.TempDir()
	at, over := filepath.Join(dir, "at"), filepath.Join(dir, "over")
	if err := os.WriteFile(at, make([]byte, 100), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(over, make([]byte, 101), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := File(at, 100); err != nil || len(b) != 100 {
		t.Errorf("File(100 bytes, 100) = %d bytes, %v", len(b), err)
	}
	for _, p := range []string{over, "/dev/zero"} {
		if _, err := File(p, 100); !errors.Is(err, ErrTooLarge) {
			t.Errorf("File(%s, 100) = %v, want ErrTooLarge", p, err)
		}
	}
	if _, err := File(filepath.Join(dir, "missing"), 100); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("File(missing) = %v, want a not-exist error", err)
	}
}
