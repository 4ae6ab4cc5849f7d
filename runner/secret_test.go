package runner

import (
	"bytes"
	"testing"

	"github.com/gorovod/gorovod/internal/auth"
)

func TestNewSecret(t *testing.T) {
	a, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != auth.SecretSize || len(b) != auth.SecretSize || bytes.Equal(a, b) {
		t.Fatalf("NewSecret gave %x and %x", a, b)
	}
}
