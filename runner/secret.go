package runner

import (
	"crypto/rand"
	"fmt"

	"github.com/gorovod/gorovod/internal/auth"
)

// NewSecret returns a fresh job secret of auth.SecretSize random bytes.
func NewSecret() ([]byte, error) {
	s := make([]byte, auth.SecretSize)
	if _, err := rand.Read(s); err != nil {
		return nil, fmt.Errorf("runner: job secret: %w", err)
	}
	return s, nil
}
