package tcptransport

import (
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
)

// rejectEvery is how often, at most, the rejections from one remote host
// are summarised at Warn while a mesh forms.
const rejectEvery = 10 * time.Second

// rejectLog reports the connections that mesh formation turns away,
// without letting a flood of junk connections (a port scanner, a
// misdirected client retrying) flood the log. The first rejection from each
// remote host is logged at Warn with its address and reason; later ones
// from that host are logged at Debug and counted, and the count is logged
// at Warn ("rejected more connections", with the last address and reason)
// at most once per rejectEvery, and once more by flush when formation ends.
type rejectLog struct {
	log *slog.Logger
	now func() time.Time

	mu    sync.Mutex
	hosts map[string]*hostRejects
}

// hostRejects is what a rejectLog knows about one remote host.
type hostRejects struct {
	count      int       // rejections not yet counted in a Warn line
	since      time.Time // when the last Warn line about the host was logged
	lastRemote string
	lastReason string
}

// newRejectLog returns a rejectLog that logs to log and reads the time
// from now.
func newRejectLog(log *slog.Logger, now func() time.Time) *rejectLog {
	return &rejectLog{log: log, now: now, hosts: map[string]*hostRejects{}}
}

// reject reports that the connection from remote was turned away for
// reason.
func (l *rejectLog) reject(remote string, reason error) {
	host := hostOf(remote)
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.hosts[host]
	if h == nil {
		l.hosts[host] = &hostRejects{since: l.now()}
		l.log.Warn("tcptransport: rejected connection", "remote", remote, "reason", reason,
			"note", "more from this host are counted, not logged each")
		return
	}
	l.log.Debug("tcptransport: rejected connection", "remote", remote, "reason", reason)
	h.count++
	h.lastRemote, h.lastReason = remote, reason.Error()
	if now := l.now(); now.Sub(h.since) >= rejectEvery {
		l.summarise(host, h, now)
	}
}

// summarise logs the rejections from host counted since its last Warn
// line. The caller holds l.mu.
func (l *rejectLog) summarise(host string, h *hostRejects, now time.Time) {
	l.log.Warn("tcptransport: rejected more connections", "host", host, "count", h.count,
		"over", now.Sub(h.since).Round(time.Millisecond), "last_remote", h.lastRemote, "last_reason", h.lastReason)
	h.count, h.since = 0, now
}

// flush summarises, host by host, every rejection not yet counted in a
// Warn line. Formation calls it once no more connections can be rejected.
func (l *rejectLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for _, host := range slices.Sorted(maps.Keys(l.hosts)) {
		if h := l.hosts[host]; h.count > 0 {
			l.summarise(host, h, now)
		}
	}
}
