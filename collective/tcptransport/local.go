package tcptransport

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/internal/auth"
)

// LocalMesh forms a mesh of size ranks inside this process over loopback
// TCP: it listens on 127.0.0.1:0 for every rank and runs every rank's
// Connect at once. Element i of the result has rank i. A nil secret means a
// fresh random one. All ranks share one host, so as in a real job every
// link moves its frames through shared memory where it can (see LinkPath);
// LocalMeshConfig with NoSharedMemory keeps them on TCP. Tests and
// in-process benchmarks use it; the caller closes every transport.
func LocalMesh(ctx context.Context, size int, secret []byte) ([]collective.Transport, error) {
	return localMesh(ctx, size, Config{Secret: secret}, tuning{})
}

// LocalMeshConfig is LocalMesh with base as every rank's Config: it fills
// in Rank, Size and Addrs per rank (whatever base holds there is ignored)
// and, where Secret is nil, a fresh random secret. It lets tests and
// benchmarks exercise the TCP path between ranks of one host
// (NoSharedMemory) or set a handshake timeout or a logger.
func LocalMeshConfig(ctx context.Context, size int, base Config) ([]collective.Transport, error) {
	return localMesh(ctx, size, base, tuning{})
}

// localMesh is LocalMeshConfig with tun's settings for every rank; the
// package's own tests and benchmarks set them.
func localMesh(ctx context.Context, size int, base Config, tun tuning) ([]collective.Transport, error) {
	if size < 1 {
		return nil, fmt.Errorf("tcptransport: mesh of %d ranks: %w", size, collective.ErrInvalid)
	}
	if base.Secret == nil {
		base.Secret = make([]byte, auth.SecretSize)
		rand.Read(base.Secret)
	}
	lns, addrs, err := listenAll(size)
	if err != nil {
		return nil, err
	}
	out := make([]collective.Transport, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for r := range size {
		cfg := base
		cfg.Rank, cfg.Size, cfg.Addrs = r, size, addrs
		if tun.eager != nil {
			cfg.Eager = tun.eager(r, size)
		}
		wg.Go(func() { out[r], errs[r] = connect(ctx, lns[r], cfg, tun) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, t := range out {
			if t != nil {
				t.Close()
			}
		}
		return nil, err
	}
	return out, nil
}

// listenAll opens one loopback listener per rank.
func listenAll(size int) ([]*Listener, []string, error) {
	lns := make([]*Listener, size)
	addrs := make([]string, size)
	for r := range size {
		ln, err := Listen("127.0.0.1:0")
		if err != nil {
			for _, l := range lns[:r] {
				l.Close()
			}
			return nil, nil, err
		}
		lns[r], addrs[r] = ln, ln.Addr()
	}
	return lns, addrs, nil
}
