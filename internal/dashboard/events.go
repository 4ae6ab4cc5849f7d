package dashboard

import (
	"bytes"
	"net/http"
	"strconv"
	"time"

	"github.com/gorovod/gorovod/internal/metrics"
)

// Pacing of an event stream.
const (
	// flushEvery is how often a stream sends what gathered: updates that
	// come faster are merged into one event.
	flushEvery = 250 * time.Millisecond
	// heartbeatEvery is how often an idle stream sends a comment, so a
	// client that went away is noticed (the write fails).
	heartbeatEvery = 15 * time.Second
	// maxPending is how many points and events a stream gathers between
	// flushes before it gives up on them and sends "resync" instead.
	maxPending = 20000
	// retryMillis is how long a browser waits before it reconnects.
	retryMillis = 3000
)

// events streams the Source's updates to one client as server-sent
// events. It reads the Source's channel at all times (gathering into a
// bounded pending update) and writes with a deadline, so neither a slow
// client nor a fast Source waits on the other for long; the Source itself
// never waits on it.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	if s.streams.Add(1) > int64(s.cfg.MaxStreams) {
		s.streams.Add(-1)
		http.Error(w, "dashboard: too many event streams", http.StatusServiceUnavailable)
		return
	}
	defer s.streams.Add(-1)
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Time{}) // the request is read; the stream is long
	updates, cancel := s.cfg.Source.Subscribe()
	defer cancel()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	var buf bytes.Buffer
	write := func() bool {
		rc.SetWriteDeadline(time.Now().Add(s.cfg.timeouts.write))
		_, err := w.Write(buf.Bytes())
		buf.Reset()
		return err == nil && rc.Flush() == nil
	}
	buf.WriteString("retry: " + strconv.Itoa(retryMillis) + "\n\n")
	if !write() {
		return
	}

	var pending metrics.Update
	var npending int
	dirty := false
	flush := time.NewTicker(flushEvery)
	defer flush.Stop()
	heartbeat := time.NewTicker(heartbeatEvery)
	defer heartbeat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case u, ok := <-updates:
			if !ok {
				if dirty {
					writeUpdate(&buf, &pending)
				}
				buf.WriteString("event: end\ndata: {}\n\n")
				write()
				return
			}
			npending += merge(&pending, u)
			if npending > maxPending {
				pending = metrics.Update{Resync: true, Ended: pending.Ended}
				npending = 0
			}
			dirty = true
		case <-flush.C:
			if !dirty {
				continue
			}
			writeUpdate(&buf, &pending)
			pending, npending, dirty = metrics.Update{}, 0, false
			if !write() {
				return
			}
			heartbeat.Reset(heartbeatEvery)
		case <-heartbeat.C:
			buf.WriteString(": ping\n\n")
			if !write() {
				return
			}
		}
	}
}

// merge adds u to p and returns how many points and events it added. A
// Resync in either drops what p gathered: the client reads a snapshot.
func merge(p *metrics.Update, u metrics.Update) int {
	p.Ended = p.Ended || u.Ended
	if p.Resync || u.Resync {
		*p = metrics.Update{Resync: true, Ended: p.Ended}
		return 0
	}
	p.Points = append(p.Points, u.Points...)
	p.Events = append(p.Events, u.Events...)
	for _, ri := range u.Ranks {
		replaced := false
		for i := range p.Ranks {
			if p.Ranks[i].Rank == ri.Rank {
				p.Ranks[i], replaced = ri, true
				break
			}
		}
		if !replaced {
			p.Ranks = append(p.Ranks, ri)
		}
	}
	return len(u.Points) + len(u.Events)
}

// writeUpdate appends u to buf as one event: "resync" or "update".
func writeUpdate(buf *bytes.Buffer, u *metrics.Update) {
	if u.Resync {
		buf.WriteString("event: resync\ndata: ")
		if u.Ended {
			buf.WriteString(`{"ended":true}`)
		} else {
			buf.WriteString("{}")
		}
		buf.WriteString("\n\n")
		return
	}
	buf.WriteString("event: update\ndata: ")
	buf.Write(marshalUpdate(*u)) // JSON has no raw newlines
	buf.WriteString("\n\n")
}
