package main

import (
	"errors"
	"io"
)

// checkBuild prints what this build supports.
func checkBuild(w io.Writer) error { return errors.New("--check-build: not built yet") }
