package jobenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorovod/gorovod/rendezvous"
)

// An elastic job is formed anew, as a new generation, whenever its set of
// worker processes changes: a worker was lost, or workers were added. The
// launcher decides each generation's members, in rank order, and publishes
// it in the rendezvous key-value store; the workers of the generation then
// exchange their data-plane addresses there and form their mesh. Keys:
//
//	elastic/latest            the number of the latest generation
//	elastic/gen/N             generation N (JSON: its members)
//	elastic/gen/N/addr/R      the data-plane address of rank R in generation N
//	elastic/alive/ID          a counter that worker ID raises every HeartbeatInterval
//
// Generations are numbered from 1 and published in order.

// ElasticMember is one worker process of an elastic job: a name that the
// launcher gives it for its whole life (GOROVOD_ELASTIC_ID) and its host.
type ElasticMember struct {
	ID   string `json:"id"`
	Host string `json:"host"`
}

// Generation is one formation of an elastic job: its number and its
// members in rank order (rank 0 first).
type Generation struct {
	N       int             `json:"n"`
	Members []ElasticMember `json:"members"`
}

// ErrElasticProtocol reports a generation record that makes no sense: one
// that does not decode, numbers out of order, no members, a repeated ID.
var ErrElasticProtocol = errors.New("jobenv: elastic generation")

// RankOf returns the rank of the worker named id in g, or -1 if g leaves
// it out.
func (g Generation) RankOf(id string) int {
	return slices.IndexFunc(g.Members, func(m ElasticMember) bool { return m.ID == id })
}

// Hosts returns the host of every rank of g.
func (g Generation) Hosts() []string {
	hosts := make([]string, len(g.Members))
	for r, m := range g.Members {
		hosts[r] = m.Host
	}
	return hosts
}

func (g Generation) check() error {
	if g.N < 1 || len(g.Members) == 0 {
		return fmt.Errorf("%w %d: %d members", ErrElasticProtocol, g.N, len(g.Members))
	}
	seen := make(map[string]bool, len(g.Members))
	for _, m := range g.Members {
		if m.ID == "" || seen[m.ID] {
			return fmt.Errorf("%w %d: member ID %q is empty or repeated", ErrElasticProtocol, g.N, m.ID)
		}
		seen[m.ID] = true
	}
	return nil
}

func genKey(n int) string        { return "elastic/gen/" + strconv.Itoa(n) }
func addrKey(n, rank int) string { return genKey(n) + "/addr/" + strconv.Itoa(rank) }
func latestKey() string          { return "elastic/latest" }

// AliveKey is the key of worker id's heartbeat counter.
func AliveKey(id string) string { return "elastic/alive/" + id }

// HeartbeatInterval is how often an elastic worker raises its heartbeat
// counter; the launcher counts a worker whose counter stands still for
// HeartbeatLimit as lost (its host is cut off, or it hangs).
const (
	HeartbeatInterval = 500 * time.Millisecond
	HeartbeatLimit    = 5 * time.Second
)

// Heartbeat raises worker id's counter every HeartbeatInterval until ctx
// ends.
func Heartbeat(ctx context.Context, c KeyValueSetter, id string) {
	t := time.NewTicker(HeartbeatInterval)
	defer t.Stop()
	for n := 1; ; n++ {
		sctx, cancel := context.WithTimeout(ctx, HeartbeatInterval)
		_ = c.Set(sctx, AliveKey(id), []byte(strconv.Itoa(n))) // a missed beat is what the launcher watches for
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
func decodeGeneration(b []byte) (Generation, error) {
	var g Generation
	if err := json.Unmarshal(b, &g); err != nil {
		return g, fmt.Errorf("%w: %v", ErrElasticProtocol, err)
	}
	return g, g.check()
}

// KeyValueSetter stores values in a rendezvous key-value store: a
// rendezvous.Client, or the launcher's own rendezvous.Server.
type KeyValueSetter interface {
	Set(ctx context.Context, key string, value []byte) error
}

// PublishGeneration makes g the job's latest generation (the launcher's
// side). g.N must be one more than the last published number.
func PublishGeneration(ctx context.Context, c KeyValueSetter, g Generation) error {
	if err := g.check(); err != nil {
		return err
	}
	b, err := json.Marshal(g)
	if err != nil {
		return err
	}
	if err := c.Set(ctx, genKey(g.N), b); err != nil {
		return err
	}
	return c.Set(ctx, latestKey(), []byte(strconv.Itoa(g.N)))
}

// AwaitGeneration returns the latest generation after generation after,
// waiting for one to be published (the workers' side; after is 0 at
// first). A worker that lagged behind skips the generations published
// meanwhile: their members have changed since.
func AwaitGeneration(ctx context.Context, c *rendezvous.Client, after int) (Generation, error) {
	b, err := c.Get(ctx, latestKey())
	if err != nil {
		return Generation{}, err
	}
	latest, err := strconv.Atoi(string(b))
	if err != nil {
		return Generation{}, fmt.Errorf("%w: latest generation %q", ErrElasticProtocol, b)
	}
	n := max(latest, after+1)
	if b, err = c.Get(ctx, genKey(n)); err != nil {
		return Generation{}, err
	}
	g, err := decodeGeneration(b)
	if err == nil && g.N != n {
		err = fmt.Errorf("%w: key %s holds generation %d", ErrElasticProtocol, genKey(n), g.N)
	}
	return g, err
}

// NewerGeneration waits until a generation after n is published and
// returns its number; a worker of generation n watches with it for
// workers that join (or for a reset it has not noticed itself).
func NewerGeneration(ctx context.Context, c *rendezvous.Client, n int) (int, error) {
	if _, err := c.Get(ctx, genKey(n+1)); err != nil {
		return 0, err
	}
	return n + 1, nil
}

// ExchangeAddrs publishes addr as the data-plane address of rank in
// generation n, with the rank's machine (MachineID; "" for none), and
// returns the addresses and machines of all size ranks, waiting for the
// others to publish theirs. A machine longer than
// rendezvous.MaxMachineLen counts as "", on every rank.
func ExchangeAddrs(ctx context.Context, c *rendezvous.Client, n, rank, size int, addr, machine string) (addrs, machines []string, err error) {
	if len(machine) > rendezvous.MaxMachineLen {
		machine = ""
	}
	if err := c.Set(ctx, addrKey(n, rank), []byte(addr+"\n"+machine)); err != nil {
		return nil, nil, err
	}
	addrs, machines = make([]string, size), make([]string, size)
	for r := range size {
		if r == rank {
			addrs[r], machines[r] = addr, machine
			continue
		}
		b, err := c.Get(ctx, addrKey(n, r))
		if err != nil {
			return nil, nil, fmt.Errorf("the address of rank %d of generation %d: %w", r, n, err)
		}
		a, m, _ := strings.Cut(string(b), "\n")
		if len(m) > rendezvous.MaxMachineLen {
			m = ""
		}
		addrs[r], machines[r] = a, m
	}
	return addrs, machines, nil
}
