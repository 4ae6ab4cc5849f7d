package shmring

// memfd_create(2) on amd64 (package syscall's table predates it).
const (
	haveMemfd      = true
	sysMemfdCreate = 319
)

// process_vm_readv(2) on amd64.
const (
	haveRemote        = true
	sysProcessVMReadv = 310
)
