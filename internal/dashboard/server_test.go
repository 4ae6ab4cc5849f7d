package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/metrics"
)

// serve starts a Server on loopback for the test and closes it after.
func serve(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s, err := Serve(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func get(t *testing.T, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	c := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func base(s *Server) string { return "http://" + s.Addr().String() }

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"":                 true,
		":8080":            true,
		"localhost:8080":   true,
		"LocalHost":        true,
		"127.0.0.1:0":      true,
		"127.0.0.2:9":      true,
		"[::1]:8080":       true,
		"[::1]":            true,
		"::1":              true,
		"0.0.0.0:8080":     false,
		"[::]:8080":        false,
		"10.1.2.3:8080":    false,
		"node1:8080":       false,
		"localhost.evil:1": false,
		"192.168.0.1":      false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
		if got := tokenNeeded(addr, false); got != !want {
			t.Errorf("tokenNeeded(%q, false) = %v, want %v", addr, got, !want)
		}
		if !tokenNeeded(addr, true) {
			t.Errorf("tokenNeeded(%q, true) = false", addr)
		}
	}
}

func TestListenAddr(t *testing.T) {
	for in, want := range map[string]string{
		"":             "127.0.0.1:0",
		"8080":         "127.0.0.1:8080",
		":8080":        "127.0.0.1:8080",
		"0.0.0.0:8080": "0.0.0.0:8080",
		"[::1]:80":     "[::1]:80",
		"node1:80":     "node1:80",
	} {
		got, err := listenAddr(in)
		if err != nil || got != want {
			t.Errorf("listenAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := listenAddr("no port here"); err == nil {
		t.Error("listenAddr accepted an address without a port")
	}
}

func TestServeLoopback(t *testing.T) {
	f := newFakeSource("train np=2")
	f.Add(step(2, 1))
	s := serve(t, Config{Source: f})
	if s.Token() != "" || strings.Contains(s.URL(), "token") {
		t.Errorf("loopback server has a token: %q, %s", s.Token(), s.URL())
	}
	resp, body := get(t, base(s)+"/")
	if resp.StatusCode != 200 || !strings.Contains(body, `id="ranks"`) {
		t.Fatalf("GET /: %d %.200s", resp.StatusCode, body)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'sha256-") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
	resp, body = get(t, base(s)+"/api/snapshot")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /api/snapshot: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var snap metrics.Snapshot
	if err := json.Unmarshal([]byte(body), &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Job != "train np=2" || len(snap.Ranks) != 2 || len(snap.Series) != 10 {
		t.Errorf("snapshot: job %q, %d ranks, %d series", snap.Job, len(snap.Ranks), len(snap.Series))
	}
	if resp, _ := get(t, base(s)+"/nothing"); resp.StatusCode != 404 {
		t.Errorf("GET /nothing: %d", resp.StatusCode)
	}
	// DNS rebinding: a Host that is not loopback.
	if resp, _ := get(t, base(s)+"/api/snapshot", "Host", "evil.example:80"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("Host evil.example: %d, want 403", resp.StatusCode)
	}
}

func TestNonFiniteValues(t *testing.T) {
	f := newFakeSource("nan")
	f.Add(metrics.Update{Points: []metrics.Point{
		{Rank: 0, Step: 1, Kind: metrics.Scalar, Name: "loss", Value: 1},
		{Rank: 0, Step: 2, Kind: metrics.Scalar, Name: "loss", Value: nan()},
		{Rank: 0, Step: 3, Kind: metrics.Scalar, Name: "loss", Value: inf()},
	}, Ranks: []metrics.RankInfo{{Rank: 0, State: "running", StepSeconds: nan()}}})
	s := serve(t, Config{Source: f})
	resp, body := get(t, base(s)+"/api/snapshot")
	if resp.StatusCode != 200 || !strings.Contains(body, `"values":[1,null,null]`) {
		t.Errorf("GET /api/snapshot with NaN: %d %s", resp.StatusCode, body)
	}
	u := string(marshalUpdate(metrics.Update{Points: []metrics.Point{{Value: nan()}}}))
	if !strings.Contains(u, `"value":null`) {
		t.Errorf("update with NaN: %s", u)
	}
}

func TestToken(t *testing.T) {
	f := newFakeSource("tok")
	f.Add(step(1, 1))
	s := serve(t, Config{Source: f, RequireToken: true})
	tok := s.Token()
	if len(tok) != 64 || strings.Trim(tok, "0123456789abcdef") != "" {
		t.Fatalf("generated token %q: want 64 hex digits", tok)
	}
	if !strings.HasSuffix(s.URL(), "/?token="+tok) {
		t.Errorf("URL %q does not carry the token", s.URL())
	}
	for _, p := range []string{"/", "/api/snapshot", "/events", "/metrics"} {
		if resp, body := get(t, base(s)+p); resp.StatusCode != 401 || strings.Contains(body, tok) {
			t.Errorf("GET %s without token: %d", p, resp.StatusCode)
		}
		if resp, _ := get(t, base(s)+p, "Authorization", "Bearer "+strings.Repeat("0", 64)); resp.StatusCode != 401 {
			t.Errorf("GET %s with a wrong token: %d", p, resp.StatusCode)
		}
		if resp, _ := get(t, base(s)+p+"?token=x"); resp.StatusCode != 401 {
			t.Errorf("GET %s?token=x: %d", p, resp.StatusCode)
		}
	}
	if resp, body := get(t, base(s)+"/metrics", "Authorization", "Bearer "+tok); resp.StatusCode != 200 || !strings.Contains(body, "gorovod_loss") {
		t.Errorf("GET /metrics with Bearer: %d", resp.StatusCode)
	}
	resp, _ := get(t, s.URL())
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("GET /?token=: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == cookieName {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Value != tok {
		t.Fatalf("cookie %+v", cookie)
	}
	if resp, body := get(t, base(s)+"/", "Cookie", cookie.String()); resp.StatusCode != 200 || !strings.Contains(body, `id="heatmap"`) {
		t.Errorf("GET / with the cookie: %d", resp.StatusCode)
	}
	if resp, _ := get(t, base(s)+"/api/snapshot", "Cookie", cookieName+"=nope"); resp.StatusCode != 401 {
		t.Errorf("GET with a wrong cookie: %d", resp.StatusCode)
	}

	s2 := serve(t, Config{Source: f, RequireToken: true, Token: "given"})
	if s2.Token() != "given" {
		t.Errorf("Token() = %q, want the one given", s2.Token())
	}
	if resp, _ := get(t, base(s2)+"/api/snapshot?token=given"); resp.StatusCode != 200 {
		t.Errorf("GET /api/snapshot?token=given: %d", resp.StatusCode)
	}
}

// sseReader reads a server-sent event stream.
type sseReader struct {
	resp *http.Response
	r    *bufio.Reader
}

func openEvents(t *testing.T, s *Server) *sseReader {
	t.Helper()
	resp, err := http.Get(base(s) + "/events")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		t.Fatalf("GET /events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &sseReader{resp: resp, r: bufio.NewReader(resp.Body)}
}

// next returns the next event's name and data (comments and retry
// skipped).
func (r *sseReader) next() (event, data string, err error) {
	for {
		line, err := r.r.ReadString('\n')
		if err != nil {
			return "", "", err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if event != "" || data != "" {
				return event, data, nil
			}
		case strings.HasPrefix(line, "event: "):
			event = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			data += line[len("data: "):]
		}
	}
}

func TestEvents(t *testing.T) {
	f := newFakeSource("sse")
	s := serve(t, Config{Source: f})
	r := openEvents(t, s)
	waitFor(t, "a subscriber", func() bool { return f.subscribers() == 1 })
	f.Add(step(2, 1))
	f.Add(step(2, 2))
	got := 0
	for got < 2*2*5 {
		ev, data, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		if ev != "update" {
			continue
		}
		var u metrics.Update
		if err := json.Unmarshal([]byte(data), &u); err != nil {
			t.Fatalf("update %s: %v", data, err)
		}
		got += len(u.Points)
		if len(u.Ranks) != 2 {
			t.Errorf("update with %d ranks, want 2 (merged by rank)", len(u.Ranks))
		}
	}
	if got != 20 {
		t.Errorf("got %d points, want 20", got)
	}
	f.Add(metrics.Update{Ended: true})
	f.Close()
	sawEnded := false
	for {
		ev, data, err := r.next()
		if err != nil {
			t.Fatalf("stream closed before \"end\": %v", err)
		}
		if ev == "update" && strings.Contains(data, `"ended":true`) {
			sawEnded = true
		}
		if ev == "end" {
			break
		}
	}
	if !sawEnded {
		t.Error("no update with ended before end")
	}
	if _, _, err := r.next(); err != io.EOF {
		t.Errorf("after end: %v, want EOF", err)
	}
}

func TestStreamCap(t *testing.T) {
	f := newFakeSource("cap")
	s := serve(t, Config{Source: f, MaxStreams: 2})
	openEvents(t, s)
	openEvents(t, s)
	if resp, _ := get(t, base(s)+"/events"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("third stream: %d, want 503", resp.StatusCode)
	}
	if resp, _ := get(t, base(s)+"/api/snapshot"); resp.StatusCode != 200 {
		t.Errorf("snapshot beside full streams: %d", resp.StatusCode)
	}
}

func TestConnCap(t *testing.T) {
	f := newFakeSource("conns")
	s := serve(t, Config{Source: f, MaxConns: 3})
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	// The fourth is answered 503 and closed, even while the three say
	// nothing: Accept does not wait on them.
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	b, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(b), "HTTP/1.1 503") {
		t.Errorf("connection over the cap got %q", b)
	}
	for _, c := range held {
		c.Close()
	}
	waitFor(t, "a place", func() bool { return s.ln.open.Load() == 0 })
	if resp, _ := get(t, base(s)+"/api/snapshot"); resp.StatusCode != 200 {
		t.Errorf("after the three closed: %d", resp.StatusCode)
	}
}

// TestCrowd: a thousand idle connections and a slowloris client do not
// keep /api/snapshot from answering, and the slowloris one is closed once
// its header takes too long.
func TestCrowd(t *testing.T) {
	f := newFakeSource("crowd")
	f.Add(step(4, 1))
	s := serve(t, Config{Source: f, timeouts: timeouts{readHeader: time.Second}})
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 1000 {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	slow, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	slowDone := make(chan error, 1)
	go func() {
		// A header that never ends, a byte at a time.
		for _, b := range []byte("GET /api/snapshot HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa") {
			if _, err := slow.Write([]byte{b}); err != nil {
				slowDone <- err
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		slowDone <- nil
	}()
	start := time.Now()
	resp, body := get(t, base(s)+"/api/snapshot")
	if resp.StatusCode != 200 || !strings.Contains(body, `"job":"crowd"`) {
		t.Errorf("snapshot in the crowd: %d", resp.StatusCode)
	}
	// A bound that only a server blocked by the crowd would miss.
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("snapshot in the crowd took %v", d)
	}
	// The slowloris client is cut off after ReadHeaderTimeout: its
	// connection reads EOF (after a 408 answer, perhaps).
	slow.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadAll(slow); err != nil {
		t.Errorf("slowloris connection was not closed by the server: %v", err)
	}
}

// TestStalledReader: a client that never reads its stream does not hold
// up the Source (Add keeps returning) nor the other clients, and is
// dropped once a write to it has waited too long.
func TestStalledReader(t *testing.T) {
	f := newFakeSource("stall")
	s := serve(t, Config{Source: f, timeouts: timeouts{write: 300 * time.Millisecond}})
	stalled, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	stalled.(*net.TCPConn).SetReadBuffer(4096)
	if _, err := stalled.Write([]byte("GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stalled subscriber", func() bool { return f.subscribers() == 1 })
	reader := openEvents(t, s)
	waitFor(t, "both subscribers", func() bool { return f.subscribers() == 2 })

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Steps of 64 ranks: some 100 KiB of JSON each.
		for k := int64(1); ctx.Err() == nil; k++ {
			f.Add(step(64, k))
			time.Sleep(5 * time.Millisecond)
		}
	}()
	// The reading client keeps getting updates (or resyncs).
	for range 5 {
		if _, _, err := reader.next(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the stalled stream to be dropped", func() bool { return f.subscribers() == 1 })
	cancel()
	wg.Wait()
	if _, _, err := reader.next(); err != nil {
		t.Errorf("reader after the stalled one was dropped: %v", err)
	}
	// Other requests are still served. (Not /api/snapshot: by now it holds
	// every point fed, megabytes, more than the write timeout of 300 ms
	// lets through on a loaded machine under -race.)
	if resp, body := get(t, base(s)+"/metrics"); resp.StatusCode != 200 || !strings.Contains(body, "gorovod_rank_step{") {
		t.Errorf("/metrics after the stalled stream was dropped: %d", resp.StatusCode)
	}
}

func TestShutdownLinger(t *testing.T) {
	f := newFakeSource("linger")
	f.Add(step(2, 1))
	s := serve(t, Config{Source: f, Linger: 500 * time.Millisecond})
	r := openEvents(t, s)
	f.Add(metrics.Update{Ended: true})
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	// While it lingers, the page of the ended job is served.
	if resp, body := get(t, base(s)+"/api/snapshot"); resp.StatusCode != 200 || !strings.Contains(body, `"ended":true`) {
		t.Errorf("snapshot while lingering: %d %s", resp.StatusCode, body)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Errorf("Shutdown returned after %v, before the linger", d)
	}
	for {
		if _, _, err := r.next(); err != nil {
			break // the stream ended with the server
		}
	}
	if _, err := net.DialTimeout("tcp", s.Addr().String(), 5*time.Second); err == nil {
		t.Error("still listening after Shutdown")
	}

	// A context done during the linger cuts it short.
	s2 := serve(t, Config{Source: f, Linger: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	s2.Shutdown(ctx)
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Shutdown with a done context took %v", d)
	}

	// Serve's context closes the server.
	ctx3, cancel3 := context.WithCancel(context.Background())
	s3, err := Serve(ctx3, Config{Addr: "127.0.0.1:0", Source: f, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cancel3()
	<-s3.served
}

func TestNothingSecretShown(t *testing.T) {
	t.Setenv("GOROVOD_SECRET", plantedSecret)
	f := newFakeSource("train np=2")
	f.Add(step(2, 1))
	f.Add(metrics.Update{Ended: true})
	var logs strings.Builder
	s := serve(t, Config{Source: f, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	var all strings.Builder
	for _, p := range []string{"/", "/api/snapshot", "/metrics"} {
		resp, body := get(t, base(s)+p)
		all.WriteString(body)
		for k, v := range resp.Header {
			all.WriteString(k + strings.Join(v, ","))
		}
	}
	r := openEvents(t, s)
	f.Add(step(2, 2))
	_, data, err := r.next()
	if err != nil {
		t.Fatal(err)
	}
	all.WriteString(data)
	var svg strings.Builder
	if err := WriteSummarySVG(&svg, f.Snapshot()); err != nil {
		t.Fatal(err)
	}
	all.WriteString(svg.String())
	all.WriteString(logs.String())
	if strings.Contains(all.String(), plantedSecret) || strings.Contains(all.String(), "GOROVOD_SECRET") {
		t.Error("the planted secret shows")
	}
	if !strings.Contains(all.String(), "train np=2") {
		t.Error("the job's label does not show: the check above checks nothing")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
