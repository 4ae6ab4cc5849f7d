package metrics

import (
	"time"

	"github.com/gorovod/gorovod/rendezvous"
)

// AddRankPoints adds the points that rank sent gorun (the rendezvous
// server's OnMetrics): its scalars and runtime series as Points, and its
// events (points with a Text, such as the engine's stall warnings) to
// the event log, in the order they came. It does not keep pts.
func (s *Store) AddRankPoints(rank int, pts []rendezvous.MetricPoint) {
	for len(pts) > 0 {
		n := 0
		for n < len(pts) && pts[n].Text == "" {
			n++
		}
		s.addRank(rank, pts[:n])
		if n < len(pts) {
			p := pts[n]
			s.AddEvent(Event{Time: time.Unix(0, p.Time), Rank: rank, Kind: p.Name, Text: p.Text})
			n++
		}
		pts = pts[n:]
	}
}

// addRank is Add for points of one rank without events, as they come
// from the rank: it finds the series of each name once in a batch
// (seriesCache), and makes Points only for subscribers (Out takes the
// points as they are: Writer.WriteRankPoints).
func (s *Store) addRank(rank int, pts []rendezvous.MetricPoint) {
	if len(pts) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	now := s.cfg.Now()
	shared := len(s.subs) > 0
	var kept []Point
	if shared {
		kept = make([]Point, 0, len(pts))
	}
	rs := s.rank(rank)
	out := s.cfg.Out
	var cache seriesCache
	accepted, changed, run := 0, false, 0 // pts[run:] are accepted and not yet written to out
	for i := range pts {
		p := &pts[i]
		k := seriesKey{Scalar, p.Name}
		if p.Runtime {
			k.kind = Runtime
		}
		sr := cache.get(k)
		if sr == nil {
			if sr = s.seriesFor(rs, k, now); sr == nil {
				if out != nil {
					out.WriteRankPoints(rank, rs.info.Host, pts[run:i])
				}
				run = i + 1
				continue
			}
			cache.put(k, sr)
		}
		sr.add(p.Step, p.Value, s.cfg.MaxPoints)
		if p.Runtime && rs.info.apply(p.Name, p.Value) {
			changed = true
		}
		accepted++
		if shared {
			kept = append(kept, Point{Rank: rank, Host: rs.info.Host, Step: p.Step, Time: time.Unix(0, p.Time),
				Kind: k.kind, Name: p.Name, Value: p.Value})
		}
	}
	if out != nil {
		out.WriteRankPoints(rank, rs.info.Host, pts[run:])
	}
	s.accepted.Add(int64(accepted))
	if !shared || accepted == 0 {
		return
	}
	u := Update{Points: kept}
	if changed {
		u.Ranks = []RankInfo{rs.info.clone()}
	}
	s.publishLocked(u)
}

// seriesCache holds the series of the last names a batch used. A rank
// sends the same few names over and over, and the names of one batch
// share their bytes (the rendezvous unpacks each name once), so a look
// here is a few comparisons of pointers where the map hashes two strings.
type seriesCache struct {
	keys [8]seriesKey
	srs  [8]*series
	n    int // entries in use
	next int // the entry put replaces once all are in use
}

// get returns k's series, or nil.
func (c *seriesCache) get(k seriesKey) *series {
	for i := range c.n {
		if c.keys[i] == k {
			return c.srs[i]
		}
	}
	return nil
}

// put remembers sr as k's series.
func (c *seriesCache) put(k seriesKey, sr *series) {
	i := c.n
	if i == len(c.keys) {
		i, c.next = c.next, (c.next+1)%len(c.keys)
	} else {
		c.n++
	}
	c.keys[i], c.srs[i] = k, sr
}
