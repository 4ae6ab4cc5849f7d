//go:build !amd64 && !arm64

package shmring

// Elsewhere no ring can be made: memfd reports ENOSYS, so Create fails.
const (
	haveMemfd      = false
	sysMemfdCreate = 0
)

// Nor can a ring's reader copy from its writer's memory.
const (
	haveRemote        = false
	sysProcessVMReadv = 0
)
