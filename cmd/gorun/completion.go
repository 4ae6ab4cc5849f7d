package main

import (
	"errors"
	"io"

	"github.com/urfave/cli/v2"
)

// completionScript prints a completion script for shell.
func completionScript(w io.Writer, shell string, app *cli.App) error {
	return errors.New("--completion: not built yet")
}

// manPage prints gorun's manual page.
func manPage(w io.Writer, app *cli.App) error { return errors.New("--man: not built yet") }
