package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// ErrAuth is wrapped by every handshake failure caused by the peer (bad
// magic, bad proof, oversized hello) and by every I/O failure during the
// handshake, which keeps the I/O error in its chain too (errors.Is finds
// io.EOF or os.ErrDeadlineExceeded as well as ErrAuth).
var ErrAuth = errors.New("auth: handshake failed")

// SecretSize is the length of a job secret in bytes.
const SecretSize = 32

// MaxHello bounds the application data a side may bind into its proof.
const MaxHello = 256

const nonceSize = 32

var magic = [4]byte{'G', 'R', 'V', '1'}

// tlsMagic opens the preamble a TLS side's server sends instead of the
// plain challenge (see Guard); a plain side that reads it, or a TLS side
// that reads magic, reports ErrMismatch.
var tlsMagic = [4]byte{'G', 'R', 'V', 'T'}

// ErrMismatch is wrapped by the handshake's error when one side was started
// with TLS (gorun --tls, GOROVOD_TLS=1) and the other without. It wraps
// ErrAuth too.
var ErrMismatch = fmt.Errorf("%w: TLS mismatch", ErrAuth)

// The two sides of a mismatch, as each side sees it.
var (
	errPeerUsesTLS = fmt.Errorf("%w: the peer uses TLS (--tls, GOROVOD_TLS=1) but this side was started without it: every rank and the launcher must agree", ErrMismatch)
	errSelfUsesTLS = fmt.Errorf("%w: this side uses TLS (--tls, GOROVOD_TLS=1) but the peer was started without it: every rank and the launcher must agree", ErrMismatch)
)

// Conn is what the handshake needs: a stream with a deadline (net.Conn is one).
type Conn interface {
	io.ReadWriter
	SetDeadline(t time.Time) error
}

// Server runs the accepting side of the handshake on c before deadline and
// returns the client's hello. The deadline is cleared on success.
func Server(c Conn, secret, hello []byte, deadline time.Time) ([]byte, error) {
	if err := check(secret, hello); err != nil {
		return nil, err
	}
	if err := c.SetDeadline(deadline); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrAuth, err)
	}
	var ns [nonceSize]byte
	if _, err := rand.Read(ns[:]); err != nil {
		return nil, fmt.Errorf("auth: nonce: %w", err)
	}
	if _, err := c.Write(append(magic[:], ns[:]...)); err != nil {
		return nil, fmt.Errorf("%w: write challenge: %w", ErrAuth, err)
	}
	var head [4 + nonceSize]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return nil, fmt.Errorf("%w: read response: %w", ErrAuth, err)
	}
	if [4]byte(head[:4]) == tlsMagic {
		return nil, errPeerUsesTLS
	}
	if [4]byte(head[:4]) != magic {
		return nil, fmt.Errorf("%w: bad magic %q", ErrAuth, head[:4])
	}
	nc := head[4:]
	peer, err := readHello(c)
	if err != nil {
		return nil, err
	}
	proof := make([]byte, sha256.Size)
	if _, err := io.ReadFull(c, proof); err != nil {
		return nil, fmt.Errorf("%w: read proof: %w", ErrAuth, err)
	}
	if !hmac.Equal(proof, mac(secret, "c2s", ns[:], nc, peer)) {
		return nil, fmt.Errorf("%w: wrong secret", ErrAuth)
	}
	out := appendHello(nil, hello)
	out = append(out, mac(secret, "s2c", nc, ns[:], hello, peer)...)
	if _, err := c.Write(out); err != nil {
		return nil, fmt.Errorf("%w: write proof: %w", ErrAuth, err)
	}
	return peer, clearDeadline(c)
}

// Client runs the dialing side of the handshake on c before deadline and
// returns the server's hello. The deadline is cleared on success.
func Client(c Conn, secret, hello []byte, deadline time.Time) ([]byte, error) {
	if err := check(secret, hello); err != nil {
		return nil, err
	}
	if err := c.SetDeadline(deadline); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrAuth, err)
	}
	var head [4 + nonceSize]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return nil, fmt.Errorf("%w: read challenge: %w", ErrAuth, err)
	}
	if [4]byte(head[:4]) == tlsMagic {
		// Answer in kind, so that the TLS side names the mismatch too
		// rather than reporting a connection closed mid-handshake.
		_, _ = c.Write(preamble(magic))
		return nil, errPeerUsesTLS
	}
	if [4]byte(head[:4]) != magic {
		return nil, fmt.Errorf("%w: bad magic %q", ErrAuth, head[:4])
	}
	ns := head[4:]
	var nc [nonceSize]byte
	if _, err := rand.Read(nc[:]); err != nil {
		return nil, fmt.Errorf("auth: nonce: %w", err)
	}
	out := append(magic[:], nc[:]...)
	out = appendHello(out, hello)
	out = append(out, mac(secret, "c2s", ns, nc[:], hello)...)
	if _, err := c.Write(out); err != nil {
		return nil, fmt.Errorf("%w: write response: %w", ErrAuth, err)
	}
	peer, err := readHello(c)
	if err != nil {
		return nil, err
	}
	proof := make([]byte, sha256.Size)
	if _, err := io.ReadFull(c, proof); err != nil {
		return nil, fmt.Errorf("%w: read proof: %w", ErrAuth, err)
	}
	if !hmac.Equal(proof, mac(secret, "s2c", nc[:], ns, peer, hello)) {
		return nil, fmt.Errorf("%w: server does not know the secret", ErrAuth)
	}
	return peer, clearDeadline(c)
}

func check(secret, hello []byte) error {
	if len(secret) != SecretSize {
		return fmt.Errorf("%w: secret is %d bytes, want %d", ErrAuth, len(secret), SecretSize)
	}
	if len(hello) > MaxHello {
		return fmt.Errorf("%w: hello is %d bytes, max %d", ErrAuth, len(hello), MaxHello)
	}
	return nil
}

// clearDeadline removes the handshake's deadline from c, so that the
// connection's owner starts with none.
func clearDeadline(c Conn) error {
	if err := c.SetDeadline(time.Time{}); err != nil {
		return fmt.Errorf("%w: %w", ErrAuth, err)
	}
	return nil
}

func appendHello(b, hello []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(hello)))
	return append(b, hello...)
}

func readHello(r io.Reader) ([]byte, error) {
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, fmt.Errorf("%w: read hello: %w", ErrAuth, err)
	}
	size := int(binary.BigEndian.Uint16(n[:]))
	if size > MaxHello {
		return nil, fmt.Errorf("%w: hello of %d bytes exceeds %d", ErrAuth, size, MaxHello)
	}
	h := make([]byte, size)
	if _, err := io.ReadFull(r, h); err != nil {
		return nil, fmt.Errorf("%w: read hello: %w", ErrAuth, err)
	}
	return h, nil
}

// mac is HMAC-SHA256 over a label and length-prefixed fields, so that no
// two different field lists hash the same bytes.
func mac(secret []byte, label string, fields ...[]byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(label))
	for _, f := range fields {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(f)))
		h.Write(n[:])
		h.Write(f)
	}
	return h.Sum(nil)
}
