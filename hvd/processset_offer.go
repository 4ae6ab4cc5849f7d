package hvd

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
)

// secretBytes is the size of a set's secret where the job has none (a
// runtime over a given transport): the set's lowest rank draws one.
const secretBytes = 32

// setOffer is what each rank of the job tells the others when a process
// set is added: which set it adds and, on the set's ranks, where to reach
// it. Every rank sends one, in or out of the set, so that every rank
// reaches the same verdict from the same gathered offers.
type setOffer struct {
	id         int    // the set's ID on this rank
	sum        uint64 // a hash of the ranks this rank was given
	invalid    bool   // those ranks are not a valid set
	noListener bool   // a rank of the set that could not listen
	addr       string // a rank of the set: its listener's address
	secret     []byte // the set's lowest rank, in a job without a secret
}

// The layout of an encoded setOffer: a fixed size, so that the offers
// travel in one all-gather.
const (
	offerBytes   = 256
	offerAddrMax = 200 // longer addresses are refused (an IPv6 address and port take at most 47 bytes)
	offerSecret  = offerBytes - secretBytes
)

const (
	offerInvalid = 1 << iota
	offerNoListener
	offerHasSecret
)

// encode lays o out in offerBytes bytes.
func (o setOffer) encode() ([]byte, error) {
	b := make([]byte, offerBytes)
	if len(o.addr) > offerAddrMax {
		return nil, fmt.Errorf("listener address %q is longer than %d bytes", o.addr, offerAddrMax)
	}
	binary.LittleEndian.PutUint64(b[0:], uint64(o.id))
	binary.LittleEndian.PutUint64(b[8:], o.sum)
	var flags byte
	if o.invalid {
		flags |= offerInvalid
	}
	if o.noListener {
		flags |= offerNoListener
	}
	if len(o.secret) == secretBytes {
		flags |= offerHasSecret
		copy(b[offerSecret:], o.secret)
	}
	b[16], b[17] = flags, byte(len(o.addr))
	copy(b[18:], o.addr)
	return b, nil
}

// decodeOffer reads an offer that encode laid out.
func decodeOffer(b []byte) (setOffer, error) {
	if len(b) != offerBytes || int(b[17]) > offerAddrMax {
		return setOffer{}, fmt.Errorf("malformed process set offer (%d bytes)", len(b))
	}
	o := setOffer{
		id:         int(binary.LittleEndian.Uint64(b[0:])),
		sum:        binary.LittleEndian.Uint64(b[8:]),
		invalid:    b[16]&offerInvalid != 0,
		noListener: b[16]&offerNoListener != 0,
		addr:       string(b[18 : 18+int(b[17])]),
	}
	if b[16]&offerHasSecret != 0 {
		o.secret = append([]byte(nil), b[offerSecret:]...)
	}
	return o, nil
}

// ranksSum hashes a list of ranks, in the order given.
func ranksSum(ranks []int) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for _, g := range ranks {
		binary.LittleEndian.PutUint64(b[:], uint64(g))
		h.Write(b[:])
	}
	return h.Sum64()
}

// exchangeOffers gathers every rank's offer for set id through the job's
// engine, indexed by rank.
func (r *Runtime) exchangeOffers(ctx context.Context, id int, mine setOffer) ([]setOffer, error) {
	b, err := mine.encode()
	if err != nil {
		return nil, err
	}
	all, err := AllgatherSlice(ctx, r, fmt.Sprintf("hvd/processset/%d/offers", id), b)
	if err != nil {
		return nil, err
	}
	if len(all) != offerBytes*r.Size() {
		return nil, fmt.Errorf("gathered %d bytes of offers from %d ranks", len(all), r.Size())
	}
	offers := make([]setOffer, r.Size())
	for g := range offers {
		if offers[g], err = decodeOffer(all[g*offerBytes : (g+1)*offerBytes]); err != nil {
			return nil, fmt.Errorf("rank %d: %w", g, err)
		}
	}
	return offers, nil
}

// agree returns the verdict every rank reaches on the gathered offers:
// nil when every rank adds the same set, ranks, valid, and each of its
// ranks can be reached. invalid is this rank's verdict on ranks, which
// every rank shares when they all gave the same ranks.
func agree(offers []setOffer, ranks []int, invalid error) error {
	for g, o := range offers {
		switch {
		case o.id != offers[0].id:
			return fmt.Errorf("rank %d adds process set %d where rank 0 adds %d: every rank must add the same sets in the same order", g, o.id, offers[0].id)
		case o.sum != offers[0].sum:
			return fmt.Errorf("rank %d gives other ranks for the set than rank 0: every rank must give the same ranks", g)
		}
	}
	if invalid != nil {
		return invalid
	}
	for _, g := range ranks {
		switch o := offers[g]; {
		case o.noListener:
			return fmt.Errorf("rank %d of the set could not open a listener for its links", g)
		case len(ranks) > 1 && o.addr == "":
			return fmt.Errorf("rank %d of the set offered no address", g)
		}
	}
	return nil
}

// agreeFormed tells every rank whether this rank formed its links of set
// id (true outside the set) and returns an error naming the ranks that
// did not, if any did not.
func (r *Runtime) agreeFormed(ctx context.Context, id int, ok bool) error {
	v := int32(1)
	if !ok {
		v = 0
	}
	all, err := AllgatherSlice(ctx, r, fmt.Sprintf("hvd/processset/%d/formed", id), []int32{v})
	if err != nil {
		return err
	}
	var failed []int
	for g, x := range all {
		if x != 1 {
			failed = append(failed, g)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("the set's links did not form on ranks %v", failed)
	}
	return nil
}
