// Package auth implements the mutual HMAC-SHA256 challenge–response that
// starts every gorovod connection (data plane, rendezvous, coordinator).
//
// Both sides prove knowledge of the 32-byte job secret without revealing it,
// and each side binds a short "hello" (for example its claimed rank) into its
// proof, so a peer cannot lie about who it is without knowing the secret.
// The exchange runs under a deadline before any other byte is read:
//
//	server → client: magic(4) | nonceS(32)
//	client → server: magic(4) | nonceC(32) | len(2) | helloC | MAC(k, "c2s", nonceS, nonceC, helloC)
//	server → client: len(2) | helloS | MAC(k, "s2c", nonceC, nonceS, helloS, helloC)
//
// MAC is HMAC-SHA256 over length-prefixed fields. Fresh random nonces on both
// sides make a recorded exchange useless for replay. By itself the
// handshake authenticates; it does not encrypt the traffic that follows.
// Guard runs it either in clear or, for jobs started with TLS, inside a
// TLS 1.3 session keyed from the secret, which then carries everything
// after it (see Guard for the design).
package auth
