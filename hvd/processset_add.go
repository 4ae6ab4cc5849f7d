package hvd

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/memtransport"
	"github.com/gorovod/gorovod/collective/tcptransport"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/settings"
)

// AddProcessSet makes a process set of ranks (the job's ranks, in
// ascending order, each once). Every rank of the job must call it, with
// the same ranks, and add sets in the same order; calls on one runtime
// must not overlap (they are serialised). It returns on every rank once
// the set's ranks are linked, or with the same error on every rank: ranks
// that are empty, unsorted, repeated or out of range (ErrInvalidArgument),
// ranks that disagree about the set, or a mesh that did not form within
// the start timeout. A rank outside the set gets a ProcessSet too, on
// which operations fail with ErrNotInProcessSet.
//
// The ranks exchange the set's description and their listening addresses
// through the job's engine (tensors named "hvd/processset/<id>/..."), and
// the set's ranks then form links of their own (see ProcessSet).
func (r *Runtime) AddProcessSet(ctx context.Context, ranks []int) (*ProcessSet, error) {
	r.psets.add.Lock()
	defer r.psets.add.Unlock()
	ctx, done, err := r.psets.begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("hvd: adding a process set on rank %d: %w", r.Rank(), err)
	}
	defer done()
	r.psets.mu.Lock()
	r.psets.next++
	id := r.psets.next
	r.psets.mu.Unlock()
	ps, err := r.formProcessSet(ctx, id, ranks)
	if err != nil {
		return nil, fmt.Errorf("hvd: adding process set %d %v on rank %d: %w", id, ranks, r.Rank(), err)
	}
	if err := r.psets.keep(ps); err != nil {
		return nil, fmt.Errorf("hvd: adding %v on rank %d: %w", ps, r.Rank(), err)
	}
	return ps, nil
}

// processSets returns the sets NewRuntime adds: ProcessSets, or when that
// is nil those of the process-sets knob (GOROVOD_PROCESS_SETS, gorun's
// --process-sets).
func (c Config) processSets() ([][]int, error) {
	if c.ProcessSets != nil {
		return c.ProcessSets, nil
	}
	sets, err := settings.ParseProcessSets(c.Knobs.ProcessSets)
	if err != nil {
		return nil, invalidArgument(err)
	}
	return sets, nil
}

// addConfiguredSets adds the sets of Config.ProcessSets, in order.
func (r *Runtime) addConfiguredSets(ctx context.Context, sets [][]int) error {
	for _, ranks := range sets {
		if _, err := r.AddProcessSet(ctx, ranks); err != nil {
			return err
		}
	}
	return nil
}

// checkRanks says what is wrong with ranks as a process set of a job of
// size ranks, or nil.
func checkRanks(ranks []int, size int) error {
	if len(ranks) == 0 {
		return invalidArgument(errors.New("a process set needs at least one rank"))
	}
	for i, g := range ranks {
		switch {
		case g < 0 || g >= size:
			return invalidArgument(fmt.Errorf("rank %d is out of range for a job of %d ranks", g, size))
		case i > 0 && g == ranks[i-1]:
			return invalidArgument(fmt.Errorf("rank %d is given twice", g))
		case i > 0 && g < ranks[i-1]:
			return invalidArgument(fmt.Errorf("ranks must be given in ascending order (%d comes after %d)", g, ranks[i-1]))
		}
	}
	return nil
}

// formProcessSet agrees with every rank on set id of ranks and, on its
// ranks, forms its mesh and starts its runtime.
func (r *Runtime) formProcessSet(ctx context.Context, id int, ranks []int) (*ProcessSet, error) {
	invalid := checkRanks(ranks, r.Size())
	ps := &ProcessSet{id: id, ranks: slices.Clone(ranks), index: -1, parent: r}
	if invalid == nil {
		ps.index = slices.Index(ranks, r.Rank())
	}
	offer := setOffer{id: id, sum: ranksSum(ranks), invalid: invalid != nil}
	var ln *tcptransport.Listener
	if ps.index >= 0 && len(ranks) > 1 {
		var err error
		if ln, err = r.setListener(); err != nil {
			r.log.Warn("hvd: process set: cannot listen", "set", id, "err", err)
			offer.noListener = true
		} else {
			offer.addr = ln.Addr()
		}
		if len(r.env.Secret) == 0 && ps.index == 0 {
			offer.secret = make([]byte, secretBytes)
			rand.Read(offer.secret)
		}
	}
	offers, err := r.exchangeOffers(ctx, id, offer)
	if err == nil {
		err = agree(offers, ranks, invalid)
	}
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return nil, err
	}
	tr, formErr := r.setMesh(ctx, ps, ln, offers)
	if err := r.agreeFormed(ctx, id, formErr == nil); err != nil || formErr != nil {
		if tr != nil {
			tr.Close()
		}
		return nil, errors.Join(formErr, err)
	}
	if tr != nil {
		ps.view = newSetRuntime(r, ps, tr)
	}
	return ps, nil
}

// setListener opens the listener of this rank's links in a set: on the
// job's data-plane host when the runtime joined through a rendezvous or
// names a bind address, else (a runtime over a given transport, whose
// ranks run in one process, as in package hvdtest) on loopback.
func (r *Runtime) setListener() (*tcptransport.Listener, error) {
	host := "127.0.0.1"
	if r.env.RendezvousAddr != "" || r.env.BindAddr != "" {
		var err error
		host, err = jobenv.DataPlaneHost(r.env.BindAddr, r.env.RendezvousAddr, r.env.LocalSize == r.env.Size, r.routeHints)
		if err != nil {
			return nil, err
		}
	}
	return tcptransport.Listen(net.JoinHostPort(host, "0"))
}

// setMesh forms this rank's links to the other ranks of ps from the
// gathered offers: nothing outside the set, an in-memory transport for a
// set of one rank, a TCP mesh otherwise. It owns ln.
func (r *Runtime) setMesh(ctx context.Context, ps *ProcessSet, ln *tcptransport.Listener, offers []setOffer) (collective.Transport, error) {
	n := len(ps.ranks)
	switch {
	case ps.index < 0:
		return nil, nil
	case n == 1:
		return memtransport.NewNetwork(1).Transport(0), nil
	}
	addrs := make([]string, n)
	for i, g := range ps.ranks {
		addrs[i] = offers[g].addr
	}
	secret := r.env.Secret
	if len(secret) == 0 {
		secret = offers[ps.ranks[0]].secret
	}
	ctx, cancel := context.WithTimeout(ctx, r.env.StartTimeout)
	defer cancel()
	tr, err := tcptransport.Connect(ctx, ln, tcptransport.Config{
		Rank: ps.index, Size: n, Addrs: addrs, Secret: secret, TLS: r.env.TLS, Congestion: r.env.TCPCongestion,
		NoSharedMemory: r.env.NoSharedMemory, Logger: r.log.With("process_set", ps.id), Machines: r.setMachines(ps.ranks),
		Eager: collective.SchedulePeers(ps.index, n, r.setHosts(ps.ranks)),
	})
	if err != nil {
		return nil, fmt.Errorf("forming the set's links: %w", err)
	}
	return setTransport{Transport: tr, ranks: ps.ranks}, nil
}

// RemoveProcessSet ends ps on every rank: every rank of the job calls it,
// once the set's operations are done. Later operations on ps fail with
// ErrProcessSetRemoved; the set's engine stops and its links close before
// it returns (operations still in flight fail with ErrShutdown). The set
// is removed on this rank even when the ranks' agreement fails (a set
// removed on one rank only, or ranks that remove different sets), which
// the error reports.
func (r *Runtime) RemoveProcessSet(ctx context.Context, ps *ProcessSet) error {
	if ps == nil || ps.parent != r {
		return invalidArgument(fmt.Errorf("hvd: RemoveProcessSet on rank %d: not a process set of this runtime", r.Rank()))
	}
	r.psets.add.Lock()
	defer r.psets.add.Unlock()
	ctx, done, err := r.psets.begin(ctx)
	if err != nil {
		return fmt.Errorf("hvd: removing %v on rank %d: %w", ps, r.Rank(), err)
	}
	defer done()
	if !ps.markRemoved() { // new operations fail from here on
		return fmt.Errorf("hvd: removing %v on rank %d: %w", ps, r.Rank(), ErrProcessSetRemoved)
	}
	ids, err := AllgatherSlice(ctx, r, fmt.Sprintf("hvd/processset/%d/remove", ps.id), []int64{int64(ps.id)})
	if err == nil {
		if i := slices.IndexFunc(ids, func(id int64) bool { return id != int64(ps.id) }); i >= 0 {
			err = fmt.Errorf("rank %d removes process set %d", i, ids[i])
		}
	}
	ps.close()
	r.psets.drop(ps)
	if err != nil {
		return fmt.Errorf("hvd: removing %v on rank %d: %w", ps, r.Rank(), err)
	}
	return nil
}
