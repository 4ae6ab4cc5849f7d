package jobenv

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/gorovod/gorovod/internal/auth"
	"github.com/gorovod/gorovod/internal/readlimit"
)

// secret returns the job secret of a job that gorun did not start:
// GOROVOD_SECRET_FILE, else GOROVOD_SECRET, else a token derived from the
// launcher's job id with a note for rank 0 to log. The token only keeps
// ranks of other jobs out: anyone who knows the job id can compute it.
func (d detector) secret(launcher, jobID string) (secret []byte, note string, err error) {
	if path := d.getenv(EnvSecretFile); path != "" {
		s, err := ReadSecretFile(path)
		return s, "", err
	}
	if s := d.getenv(EnvSecret); s != "" {
		b, err := hex.DecodeString(s)
		if err != nil || len(b) != auth.SecretSize {
			return nil, "", fmt.Errorf("%s: want %d hexadecimal digits (<%d characters, redacted>)", EnvSecret, 2*auth.SecretSize, len(s))
		}
		return b, "", nil
	}
	note = fmt.Sprintf("neither %s nor %s is set: ranks prove a token derived from the %s job id, which keeps other jobs out but not someone who can reach the job's ports and knows the id; set %s to a file of %d hex digits that only you can read (openssl rand -hex %d)",
		EnvSecretFile, EnvSecret, launcher, EnvSecretFile, 2*auth.SecretSize, auth.SecretSize)
	return JobToken(launcher, jobID), note, nil
}

// JobToken is the secret of a job started without one: SHA-256 over the
// launcher's name and its job id.
func JobToken(launcher, jobID string) []byte {
	sum := sha256.Sum256([]byte("gorovod job token v1\x00" + launcher + "\x00" + jobID))
	return sum[:]
}

// maxSecretFile bounds the size of a secret file: ReadSecretFile reads at
// most one byte more.
const maxSecretFile = 4 << 10

// ReadSecretFile reads a job secret from path: a regular file that only its
// owner may read or write (mode 0600 or stricter) holding 2×auth.SecretSize hex
// digits, surrounding white space ignored, 4 KiB at most. Errors name the path and what
// to fix, never the file's content.
func ReadSecretFile(path string) ([]byte, error) {
	where := EnvSecretFile + "=" + clip(path, maxQuoted)
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", where)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s: mode %04o lets other users read or change it; chmod 600 it", where, perm)
	}
	raw, err := readlimit.File(path, maxSecretFile)
	switch {
	case errors.Is(err, readlimit.ErrTooLarge):
		return nil, fmt.Errorf("%s: larger than %d KiB; want %d hexadecimal digits", where, maxSecretFile>>10, 2*auth.SecretSize)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	text := strings.TrimSpace(string(raw))
	b, err := hex.DecodeString(text)
	if err != nil || len(b) != auth.SecretSize {
		return nil, fmt.Errorf("%s: want %d hexadecimal digits (make one with: openssl rand -hex %d), found %d characters",
			where, 2*auth.SecretSize, auth.SecretSize, len(text))
	}
	return b, nil
}
