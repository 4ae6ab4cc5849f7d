// Package frame is the frame format of every link of package tcptransport,
// over TCP and through shared memory alike: a 24-byte header, then the
// payload.
package frame
