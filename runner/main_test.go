package runner

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: the
// driver's goroutines must be gone when Launch returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
