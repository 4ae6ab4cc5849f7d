package shm

import (
	"sync"

	"github.com/gorovod/gorovod/collective/tcptransport/internal/shmring"
)

// BudgetBytes is the shared-memory budget: the most ring capacity one rank
// creates, whatever the number of ranks on its host. Each link to a peer on the host costs
// the capacity of the ring this rank writes (the peer's ring is the
// peer's). The eager links share eagerBytes; a link formed on demand gets
// the largest capacity up to a quarter of what is left (so a few such
// links still get large rings, and many get small ones), at least
// shmring.MinCapacity; once that no longer fits, links stay on TCP.
const BudgetBytes = 16 << 20

// eagerBytes is the part of BudgetBytes that the eager links share.
const eagerBytes = 12 << 20

// Budget hands out one rank's ring capacities under BudgetBytes; its
// methods are Setup.Capacity for the handshakes of eager links and of
// links formed on demand.
type Budget struct {
	mu    sync.Mutex
	eager int // the capacity of each eager link's ring; 0 when none fits
	spent int // bytes of rings created so far
}

// NewBudget sizes the eager links' rings: the largest power of two up
// to shmring.MaxCapacity that lets localEager of them fit in eagerBytes
// (4 MiB each for up to 3 links, 1 MiB for up to 12, ...).
func NewBudget(localEager int) *Budget {
	b := &Budget{}
	if localEager == 0 {
		return b
	}
	for c := shmring.MaxCapacity; c >= shmring.MinCapacity; c /= 2 {
		if c*localEager <= eagerBytes {
			b.eager = c
			break
		}
	}
	return b
}

// Eager returns the capacity of an eager link's ring, or 0 (stay on TCP)
// when the budget has no room left.
func (b *Budget) Eager(int) int {
	return b.take(func(int) int { return max(b.eager, shmring.MinCapacity) })
}

// OnDemand returns the capacity of the ring of a link formed on demand, or
// 0.
func (b *Budget) OnDemand(int) int {
	return b.take(func(left int) int {
		c := shmring.MaxCapacity
		for c > shmring.MinCapacity && c > left/4 {
			c /= 2
		}
		return c
	})
}

// take spends the capacity that size chooses from what is left of the
// budget, if it fits, and returns it; 0 if it does not.
func (b *Budget) take(size func(left int) int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := size(BudgetBytes - b.spent)
	if b.spent+c > BudgetBytes {
		return 0
	}
	b.spent += c
	return c
}
