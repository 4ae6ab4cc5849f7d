package shmring

import "errors"

// ErrGone is Ring.Read's report that the writer has gone away (its gone
// function said so) and everything it wrote has been read.
var ErrGone = errors.New("shmring: writer gone")
