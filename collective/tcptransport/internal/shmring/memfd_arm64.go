package shmring

import "syscall"

// memfd_create(2) on arm64.
const (
	haveMemfd      = true
	sysMemfdCreate = syscall.SYS_MEMFD_CREATE
)

// process_vm_readv(2) on arm64.
const (
	haveRemote        = true
	sysProcessVMReadv = 270
)
