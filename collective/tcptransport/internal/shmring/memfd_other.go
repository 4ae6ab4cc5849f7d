//go:build !amd64 && !arm64

package shmring

// Elsewhere no ring can be made: memfd reports ENOSYS, so Create fails.
const (
	haveMemfd      = false
	sysMemfdCreate = 0
)
