// Package testsshd starts a throwaway OpenSSH server on a loopback address
// for tests of the ssh launcher: a fresh host key, a fresh client key that
// it accepts for the current user, and a known_hosts file that trusts it.
//
//	srv := testsshd.Start(t) // skips the test when sshd is not installed
//	cfg := runner.SSHConfig{Port: srv.Port, IdentityFile: srv.IdentityFile,
//		ExtraArgs: srv.ExtraArgs()}
//	// ... run ranks on srv.Host ("127.0.0.2") ...
//
// Debian and Ubuntu: apt-get install openssh-server. Set
// GOROVOD_REQUIRE_SSHD=1 (as CI does) to fail instead of skip without it.
package testsshd
