// Package testenv names the environment variables that tell gorovod's test
// fixtures to fail instead of skip when what they need is missing: CI
// switches of the test harness (test.sh sets them all to 1).
//
// They are not part of the launcher–worker contract: no launcher writes
// them and no worker reads them (that contract is the GOROVOD_* variables
// of jobenv/env.go).
package testenv
