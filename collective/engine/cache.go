package engine

// cacheState classifies a request against the response cache.
type cacheState uint8

const (
	cacheMiss    cacheState = iota // no entry of that name
	cacheHit                       // an entry with exactly these parameters
	cacheInvalid                   // an entry of that name with other parameters
)

// responseCache remembers the responses of names negotiated in full, so
// that a later request with the same parameters is negotiated by one bit
// (its slot) instead of being sent. Every rank holds an identical copy:
// entries are added, used and evicted only by decisions every rank makes
// from the same data, in the same order, so a name has the same slot
// everywhere. When full, the least recently used entry is evicted.
type responseCache struct {
	capacity int
	slots    []*cacheEntry // by slot; nil = free
	byName   map[string]int
	clock    uint64 // counts uses, for LRU order
}

type cacheEntry struct {
	resp  *response
	local *Request // this rank's request as negotiated; nil if it had none
	used  uint64
}

func newResponseCache(capacity int) *responseCache {
	return &responseCache{capacity: max(capacity, 0), byName: map[string]int{}}
}

// lookup classifies r and returns its slot when there is an entry.
func (c *responseCache) lookup(r *Request) (int, cacheState) {
	slot, ok := c.byName[r.Name]
	if !ok {
		return -1, cacheMiss
	}
	if e := c.slots[slot]; e.local == nil || !e.local.Equal(r) {
		return slot, cacheInvalid
	}
	return slot, cacheHit
}

// at returns the entry in slot, or nil.
func (c *responseCache) at(slot int) *cacheEntry {
	if slot < 0 || slot >= len(c.slots) {
		return nil
	}
	return c.slots[slot]
}

// span is the number of slots the bit vector covers: the highest slot in
// use plus one.
func (c *responseCache) span() int { return len(c.slots) }

// touch marks slot as just used.
func (c *responseCache) touch(slot int) {
	c.clock++
	c.slots[slot].used = c.clock
}

// put stores resp (with this rank's request local, nil if none) in the
// lowest free slot, evicting the least recently used entry when full. It
// returns the slot and the name it evicted ("" if none). With capacity 0
// it stores nothing and returns slot -1.
func (c *responseCache) put(local *Request, resp *response) (slot int, evicted string) {
	if c.capacity == 0 {
		return -1, ""
	}
	if old, ok := c.byName[resp.name]; ok {
		c.remove(old)
	}
	slot = c.free()
	if slot < 0 {
		slot = c.lru()
		evicted = c.slots[slot].resp.name
		c.remove(slot)
	}
	stored := *resp
	stored.seen = nil
	if slot == len(c.slots) {
		c.slots = append(c.slots, nil)
	}
	c.slots[slot] = &cacheEntry{resp: &stored, local: local}
	c.byName[resp.name] = slot
	c.touch(slot)
	return slot, evicted
}

// evict removes name's entry and returns its slot, or -1.
func (c *responseCache) evict(name string) int {
	slot, ok := c.byName[name]
	if !ok {
		return -1
	}
	c.remove(slot)
	return slot
}

func (c *responseCache) remove(slot int) {
	delete(c.byName, c.slots[slot].resp.name)
	c.slots[slot] = nil
	for len(c.slots) > 0 && c.slots[len(c.slots)-1] == nil {
		c.slots = c.slots[:len(c.slots)-1]
	}
}

// free returns the lowest free slot, len(slots) to grow, or -1 when full.
func (c *responseCache) free() int {
	for i, e := range c.slots {
		if e == nil {
			return i
		}
	}
	if len(c.slots) < c.capacity {
		return len(c.slots)
	}
	return -1
}

// lru returns the slot of the least recently used entry.
func (c *responseCache) lru() int {
	best := 0
	for i, e := range c.slots {
		if e.used < c.slots[best].used {
			best = i
		}
	}
	return best
}
