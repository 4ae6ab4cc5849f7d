// Package tcpopt sets and reads the Linux TCP socket options that gorovod's
// data links and its benchmark peers choose for themselves, through a
// socket's syscall.RawConn so that the socket stays in Go's netpoller.
package tcpopt
