package tcptransport

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport/shm"
	"github.com/gorovod/gorovod/kernels"
)

// remoteHelperEnv carries "<secret in hex>,<rank 1's address>" to
// TestShmRemoteHelperProcess; it is set only in the helper process that
// TestShmRemotePeerKilledMidAllreduce starts.
const remoteHelperEnv = "GOROVOD_TEST_SHM_REMOTE_HELPER"

// remoteKillBytes is the all-reduce of TestShmRemotePeerKilledMidAllreduce:
// 64 MiB a rank, so that every segment (1 MiB) is a remote frame and one
// all-reduce lasts long enough for the kill to land inside it.
const remoteKillBytes = 64 << 20

// TestShmRemotePeerKilledMidAllreduce kills (SIGKILL) a rank while its
// peer copies its segments straight from its memory: rank 0 is a helper
// process, rank 1 this test, both with remote frames on, all-reducing
// 64 MiB over and over. Once rank 1 has copied a payload from the
// helper's memory, the helper is killed; rank 1's all-reduce must then
// fail, within a minute (not hang), with collective.ErrPeerGone in an
// OpError that blames peer 0.
func TestShmRemotePeerKilledMidAllreduce(t *testing.T) {
	secret := secretOf(7)
	lns, addrs := listenN(t, 1)
	helper, helperAddr := startRemoteHelper(t, secret, addrs[0])
	cfg := Config{Rank: 1, Size: 2, Addrs: []string{helperAddr, addrs[0]}, Secret: secret, HandshakeTimeout: time.Minute}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	tr, err := connect(ctx, lns[0], cfg, tuning{remoteMin: shm.RemoteFloor})
	if err != nil {
		t.Fatalf("connecting to the helper: %v", err)
	}
	defer tr.Close()
	if _, ok := tr.(*transport).conns[0].link.(*shm.Link); !ok {
		t.Fatal("the link to the helper is not in shared memory")
	}
	comm := collective.NewComm(tr, collective.Options{})
	failed := make(chan error, 1)
	go func() {
		buf := make([]byte, remoteKillBytes)
		for {
			if err := comm.Allreduce(ctx, kernels.F32, buf, kernels.Sum, collective.ReduceOptions{}); err != nil {
				failed <- err
				return
			}
		}
	}()
	waitRemoteRead(t, tr, failed)
	helper.Process.Kill()
	var got error
	select {
	case got = <-failed:
	case <-time.After(time.Minute):
		t.Fatal("the all-reduce did not end within a minute of its peer's kill")
	}
	if ctx.Err() != nil {
		t.Fatalf("the all-reduce ended only with its context: %v", got)
	}
	if !errors.Is(got, collective.ErrPeerGone) {
		t.Errorf("all-reduce after the peer's kill = %v, want ErrPeerGone", got)
	}
	t.Logf("after the kill: %v", got)
	var oe *collective.OpError
	if !errors.As(got, &oe) || oe.Peer != 0 || oe.Rank != 1 {
		t.Errorf("all-reduce after the peer's kill = %v, want an OpError of rank 1 blaming peer 0", got)
	}
}

// waitRemoteRead returns once tr has copied a payload from a peer's
// memory; an all-reduce that fails first (on failed) or a minute without
// such a copy fails the test.
func waitRemoteRead(t *testing.T, tr collective.Transport, failed <-chan error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for remoteReads(tr) == 0 {
		select {
		case err := <-failed:
			t.Fatalf("the all-reduce failed before the kill: %v", err)
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no payload was copied from the helper's memory within a minute")
		}
	}
}

// startRemoteHelper starts TestShmRemoteHelperProcess as rank 0 of a
// two-rank job with secret whose rank 1 listens at peer, and returns it
// and its data-plane address. It is killed when t ends, and with the test
// process.
func startRemoteHelper(t *testing.T, secret []byte, peer string) (*exec.Cmd, string) {
	t.Helper()
	return startHelperProcess(t, "TestShmRemoteHelperProcess", remoteHelperEnv+"="+hex.EncodeToString(secret)+","+peer)
}

// TestShmRemoteHelperProcess is rank 0 of the two-rank job of
// TestShmRemotePeerKilledMidAllreduce, with remote frames on: it
// all-reduces remoteKillBytes until it is killed. Run any other way, it
// skips.
func TestShmRemoteHelperProcess(t *testing.T) {
	secretHex, peer, ok := strings.Cut(os.Getenv(remoteHelperEnv), ",")
	secret, err := hex.DecodeString(secretHex)
	if !ok || err != nil || len(secret) == 0 {
		t.Skip("a helper process of TestShmRemotePeerKilledMidAllreduce")
	}
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("addr=%s\n", ln.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := Config{Size: 2, Addrs: []string{ln.Addr(), peer}, Secret: secret, HandshakeTimeout: time.Minute}
	tr, err := connect(ctx, ln, cfg, tuning{remoteMin: shm.RemoteFloor})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	comm := collective.NewComm(tr, collective.Options{})
	buf := make([]byte, remoteKillBytes)
	for {
		if err := comm.Allreduce(ctx, kernels.F32, buf, kernels.Sum, collective.ReduceOptions{}); err != nil {
			t.Fatalf("the helper was not killed (Allreduce: %v)", err)
		}
	}
}
