package main

import "github.com/urfave/cli/v2"

// applyConfigFile applies --config-file.
func applyConfigFile(c *cli.Context) error { return nil }
