//go:build !amd64 && !arm64

package tcptransport

// Elsewhere rings are not made (memfd reports ENOSYS) and same-host links
// stay on TCP.
const (
	haveMemfd      = false
	sysMemfdCreate = 0
)
