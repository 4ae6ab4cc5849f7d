package auth

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"time"
)

// The labels of the derivations over the job secret: the Ed25519 seed of
// the job's TLS key (HKDF-SHA256 info), the keying material exported from a
// TLS session (RFC 8446 section 7.5) and the HMAC that binds the secret to
// that session.
const (
	keyLabel      = "gorovod tls v1"
	exporterLabel = "EXPORTER-gorovod-auth-v1"
	bindLabel     = "gorovod tls binding v1"
)

// recordHandshake is the first byte of a TLS ClientHello record.
const recordHandshake = 0x16

// Guard authenticates the connections of one job: the mutual HMAC
// handshake over the job secret (Server, Client), in clear or, with TLS,
// inside a TLS 1.3 session that encrypts everything after it.
//
// With TLS both sides derive one Ed25519 key from the secret (HKDF-SHA256)
// and present a self-signed certificate of it; each side requires the
// other's certificate and accepts only that key, so a peer without the
// secret fails the TLS handshake itself. Inside the session the HMAC
// handshake runs with a key bound to the session (an HMAC of the secret
// over keying material exported from it), so a relay that terminates two
// sessions cannot splice them. A TLS server first sends a preamble of the
// plain challenge's length (tlsMagic, then zeros); a plain side reads it as
// a bad magic and both sides fail with ErrMismatch rather than a timeout.
type Guard struct {
	secret []byte
	tls    *tlsConfigs // nil: plain
}

// tlsConfigs holds the server and client configurations of a TLS guard.
type tlsConfigs struct {
	server, client *tls.Config
}

// NewGuard returns the guard of a job with secret, with TLS or without.
func NewGuard(secret []byte, useTLS bool) (*Guard, error) {
	if len(secret) != SecretSize {
		return nil, fmt.Errorf("%w: secret is %d bytes, want %d", ErrAuth, len(secret), SecretSize)
	}
	g := &Guard{secret: bytes.Clone(secret)}
	if !useTLS {
		return g, nil
	}
	cfgs, err := newTLSConfigs(secret)
	if err != nil {
		return nil, err
	}
	g.tls = cfgs
	return g, nil
}

// TLS reports whether the guard's connections use TLS.
func (g *Guard) TLS() bool { return g.tls != nil }

// Server runs the accepting side on c before deadline and returns the
// stream to use from then on (c itself, or the TLS session over it) and the
// client's hello. The deadline is cleared on success.
func (g *Guard) Server(c net.Conn, hello []byte, deadline time.Time) (net.Conn, []byte, error) {
	if g.tls == nil {
		peer, err := Server(c, g.secret, hello, deadline)
		return c, peer, err
	}
	if err := c.SetDeadline(deadline); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrAuth, err)
	}
	if _, err := c.Write(preamble(tlsMagic)); err != nil {
		return nil, nil, fmt.Errorf("%w: write TLS preamble: %w", ErrAuth, err)
	}
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		return nil, nil, fmt.Errorf("%w: read TLS hello: %w", ErrAuth, err)
	}
	if first[0] != recordHandshake {
		return nil, nil, notTLS(c, first[0])
	}
	tc := tls.Server(&prefixConn{Conn: c, first: first[:]}, g.tls.server)
	if err := tc.Handshake(); err != nil {
		return nil, nil, fmt.Errorf("%w: TLS handshake: %w", ErrAuth, err)
	}
	key, err := bind(g.secret, tc)
	if err != nil {
		return nil, nil, err
	}
	peer, err := Server(tc, key, hello, deadline)
	if err != nil {
		return nil, nil, err
	}
	return tc, peer, nil
}

// Client runs the dialing side on c before deadline and returns the stream
// to use from then on (c itself, or the TLS session over it) and the
// server's hello. The deadline is cleared on success.
func (g *Guard) Client(c net.Conn, hello []byte, deadline time.Time) (net.Conn, []byte, error) {
	if g.tls == nil {
		peer, err := Client(c, g.secret, hello, deadline)
		return c, peer, err
	}
	if err := c.SetDeadline(deadline); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrAuth, err)
	}
	var head [4 + nonceSize]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return nil, nil, fmt.Errorf("%w: read TLS preamble: %w", ErrAuth, err)
	}
	switch [4]byte(head[:4]) {
	case tlsMagic:
	case magic:
		_, _ = c.Write(preamble(tlsMagic)) // the plain server then names the mismatch too
		return nil, nil, errSelfUsesTLS
	default:
		return nil, nil, fmt.Errorf("%w: bad magic %q", ErrAuth, head[:4])
	}
	tc := tls.Client(c, g.tls.client)
	if err := tc.Handshake(); err != nil {
		return nil, nil, fmt.Errorf("%w: TLS handshake: %w", ErrAuth, err)
	}
	key, err := bind(g.secret, tc)
	if err != nil {
		return nil, nil, err
	}
	peer, err := Client(tc, key, hello, deadline)
	if err != nil {
		return nil, nil, err
	}
	return tc, peer, nil
}

// notTLS explains a first byte that does not open a TLS record: a plain
// client answers the preamble with its own magic (see Client).
func notTLS(c net.Conn, first byte) error {
	rest := make([]byte, len(magic)-1)
	if first == magic[0] {
		if _, err := io.ReadFull(c, rest); err == nil && bytes.Equal(rest, magic[1:]) {
			return errSelfUsesTLS
		}
	}
	return fmt.Errorf("%w: peer sent %#x, not a TLS handshake", ErrAuth, first)
}

// preamble is m followed by zeros, as long as the plain challenge.
func preamble(m [4]byte) []byte {
	b := make([]byte, len(m)+nonceSize)
	copy(b, m[:])
	return b
}

// bind derives the HMAC handshake's key for the session tc: an HMAC of the
// secret over keying material exported from the session, which the two
// ends of one session share and the two sessions of a relay do not.
func bind(secret []byte, tc *tls.Conn) ([]byte, error) {
	cs := tc.ConnectionState()
	ekm, err := cs.ExportKeyingMaterial(exporterLabel, nil, 32)
	if err != nil {
		return nil, fmt.Errorf("%w: export keying material: %w", ErrAuth, err)
	}
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(bindLabel))
	h.Write(ekm)
	return h.Sum(nil), nil
}

// newTLSConfigs derives the job's key and certificate from secret and
// builds the TLS 1.3 configurations of both sides around them.
func newTLSConfigs(secret []byte) (*tlsConfigs, error) {
	seed, err := hkdf.Key(sha256.New, secret, nil, keyLabel, ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("auth: derive TLS key: %w", err)
	}
	key := ed25519.NewKeyFromSeed(seed)
	pub := key.Public().(ed25519.PublicKey)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "gorovod job"},
		NotBefore:    time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:     time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		return nil, fmt.Errorf("auth: TLS certificate: %w", err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	verify := func(cs tls.ConnectionState) error { return verifyPeer(cs, pub) }
	base := tls.Config{
		MinVersion:                  tls.VersionTLS13,
		MaxVersion:                  tls.VersionTLS13,
		Certificates:                []tls.Certificate{cert},
		VerifyConnection:            verify,
		SessionTicketsDisabled:      true,
		DynamicRecordSizingDisabled: true,
	}
	server, client := base.Clone(), base.Clone()
	server.ClientAuth = tls.RequireAnyClientCert
	// No CA and no host name: VerifyConnection accepts the job's key only.
	client.InsecureSkipVerify = true
	client.ServerName = "gorovod"
	return &tlsConfigs{server: server, client: client}, nil
}

// errPeerKey is the reason a TLS peer is refused that presented another
// key than the job's: it does not hold the job secret.
var errPeerKey = errors.New("peer's TLS key is not the job's (wrong secret)")

// verifyPeer accepts a session whose peer presented exactly one
// certificate, of the job's key pub.
func verifyPeer(cs tls.ConnectionState, pub ed25519.PublicKey) error {
	if len(cs.PeerCertificates) != 1 {
		return fmt.Errorf("auth: peer presented %d TLS certificates, want 1", len(cs.PeerCertificates))
	}
	got, ok := cs.PeerCertificates[0].PublicKey.(ed25519.PublicKey)
	if !ok || !got.Equal(pub) {
		return errPeerKey
	}
	return nil
}

// prefixConn is a connection whose first bytes were read already.
type prefixConn struct {
	net.Conn
	first []byte
}

// Read returns the bytes read ahead first.
func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.first) > 0 {
		n := copy(b, p.first)
		p.first = p.first[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}
