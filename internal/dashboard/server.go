package dashboard

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorovod/gorovod/internal/metrics"
)

// Defaults of Config's limits.
const (
	// DefaultMaxConns is Config.MaxConns when zero.
	DefaultMaxConns = 2048
	// DefaultMaxStreams is Config.MaxStreams when zero.
	DefaultMaxStreams = 256
)

// Timeouts of the server's connections.
const (
	// readHeaderTimeout closes a connection whose request header has not
	// all come in this long (slowloris).
	readHeaderTimeout = 10 * time.Second
	// readTimeout bounds reading a whole request; the routes take no body.
	readTimeout = 20 * time.Second
	// idleTimeout closes a kept-alive connection that sends nothing more.
	idleTimeout = 60 * time.Second
	// writeTimeout bounds writing one answer, and each event of a stream.
	writeTimeout = 15 * time.Second
	// maxHeaderBytes bounds a request's header.
	maxHeaderBytes = 16 << 10
	// drainTimeout is how long Shutdown waits for requests in flight.
	drainTimeout = 2 * time.Second
)

// cookieName is the cookie that carries the token after ?token=.
const cookieName = "gorovod_dashboard"

// Config says where and what a Server serves.
type Config struct {
	// Addr is host:port to listen on. An empty host (":8080", or "" for
	// any free port) means 127.0.0.1: the dashboard is on loopback unless
	// told otherwise, such as "0.0.0.0:8080" or "node1:8080".
	Addr string
	// Token is what a request must carry when the address is not
	// loopback (or RequireToken is set). Empty: the server makes one,
	// 32 random bytes in hex (see Server.Token and Server.URL).
	Token string
	// RequireToken asks for the token on a loopback address too.
	RequireToken bool
	// Linger is how long Shutdown keeps serving before it stops, so that
	// the page of a job that ended can still be read (gorun's
	// --dashboard-linger).
	Linger time.Duration
	// Source is what the server shows. Required.
	Source metrics.Source
	// Logger receives the server's own logs. Nil: slog.Default().
	Logger *slog.Logger
	// MaxConns caps the connections open at once (DefaultMaxConns when
	// zero); one more is answered 503 and closed.
	MaxConns int
	// MaxStreams caps the /events streams open at once
	// (DefaultMaxStreams when zero); one more is answered 503.
	MaxStreams int

	// timeouts, when set, replace readHeaderTimeout and writeTimeout
	// (tests).
	timeouts timeouts
}

type timeouts struct{ readHeader, write time.Duration }

// Server is a running dashboard. Its methods are safe for concurrent use.
type Server struct {
	cfg      Config
	log      *slog.Logger
	ln       *limitListener
	http     *http.Server
	token    string
	tokenSum [sha256.Size]byte
	needAuth bool
	url      string

	streams atomic.Int64
	done    chan struct{} // closed when the server stops: streams end
	stop    sync.Once
	served  chan struct{} // closed when http.Server.Serve returned
}

// Serve listens on cfg.Addr and serves in the background until ctx is
// done (then it closes at once, as Close), Shutdown or Close. It returns
// once the address is bound, so Server.Addr and URL are known; an error
// means nothing is served.
//
// gorun's wiring: start it with the job's Store as Source, print
// s.URL() (it carries the token when one is needed), and after the job
// ended call s.Shutdown(ctx), which keeps serving for Linger first.
func Serve(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Source == nil {
		return nil, errors.New("dashboard: Config.Source is nil")
	}
	addr, err := listenAddr(cfg.Addr)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:    cfg,
		log:    cfg.Logger,
		done:   make(chan struct{}),
		served: make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.cfg.MaxConns <= 0 {
		s.cfg.MaxConns = DefaultMaxConns
	}
	if s.cfg.MaxStreams <= 0 {
		s.cfg.MaxStreams = DefaultMaxStreams
	}
	if s.cfg.timeouts.readHeader <= 0 {
		s.cfg.timeouts.readHeader = readHeaderTimeout
	}
	if s.cfg.timeouts.write <= 0 {
		s.cfg.timeouts.write = writeTimeout
	}
	s.needAuth = tokenNeeded(addr, cfg.RequireToken)
	if s.needAuth {
		s.token = cfg.Token
		if s.token == "" {
			b := make([]byte, 32)
			if _, err := rand.Read(b); err != nil {
				return nil, fmt.Errorf("dashboard: token: %w", err)
			}
			s.token = hex.EncodeToString(b)
		}
		s.tokenSum = sha256.Sum256([]byte(s.token))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	s.ln = newLimitListener(ln, s.cfg.MaxConns)
	s.http = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.cfg.timeouts.readHeader,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.url = "http://" + displayAddr(cfg.Addr, ln.Addr()) + "/"
	if s.needAuth {
		s.url += "?token=" + s.token
	}
	s.log.Info("dashboard: serving", "addr", ln.Addr().String(), "token", s.needAuth)
	go func() {
		defer close(s.served)
		if err := s.http.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Warn("dashboard: stopped", "err", err)
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.done:
		}
	}()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Token is the token requests need, or "" when the server needs none.
func (s *Server) Token() string { return s.token }

// URL is the page's address, with ?token= when the server needs one:
// what gorun prints at start.
func (s *Server) URL() string { return s.url }

// Shutdown keeps serving for Config.Linger, or until ctx is done if
// sooner, so that the page of an ended job can still be read; then it
// stops: it ends the event streams, closes the listener and waits a
// moment for requests in flight. If ctx is done before the linger is
// over, it closes at once, as Close.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.cfg.Linger > 0 {
		t := time.NewTimer(s.cfg.Linger)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return s.Close()
		case <-s.done:
			t.Stop()
		}
	}
	s.stop.Do(func() { close(s.done) })
	dctx, cancel := context.WithTimeout(ctx, drainTimeout)
	defer cancel()
	err := s.http.Shutdown(dctx)
	if err != nil {
		s.http.Close()
	}
	<-s.served
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		err = nil // the stragglers were closed
	}
	return err
}

// Close stops the server at once: the listener and every connection.
func (s *Server) Close() error {
	s.stop.Do(func() { close(s.done) })
	err := s.http.Close()
	<-s.served
	return err
}

// Handler is the server's routes, with its checks of the token and the
// Host, for tests and for mounting elsewhere.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /api/snapshot", s.snapshot)
	mux.HandleFunc("GET /events", s.events)
	mux.HandleFunc("GET /metrics", s.metrics)
	return s.guard(mux)
}

// guard checks every request's access before mux sees it and sets the
// headers every answer carries.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		// A client that does not read its answer is dropped (/events
		// moves its own deadline along).
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.cfg.timeouts.write))
		if !s.needAuth {
			// Loopback without a token: only for a Host that is loopback,
			// so that a web page elsewhere cannot read it by rebinding its
			// own name to 127.0.0.1.
			if !IsLoopback(r.Host) {
				http.Error(w, "forbidden: not a loopback Host", http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if q := r.URL.Query().Get("token"); q != "" {
			if !s.tokenOK(q) {
				s.unauthorized(w)
				return
			}
			http.SetCookie(w, &http.Cookie{
				Name: cookieName, Value: s.token, Path: "/",
				HttpOnly: true, SameSite: http.SameSiteStrictMode,
			})
			if r.URL.Path == "/" {
				// Drop the token from the address bar and history.
				u := *r.URL
				v := u.Query()
				v.Del("token")
				u.RawQuery = v.Encode()
				http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if a := r.Header.Get("Authorization"); a != "" {
			tok, ok := strings.CutPrefix(a, "Bearer ")
			if ok && s.tokenOK(strings.TrimSpace(tok)) {
				next.ServeHTTP(w, r)
				return
			}
			s.unauthorized(w)
			return
		}
		if c, err := r.Cookie(cookieName); err == nil && s.tokenOK(c.Value) {
			next.ServeHTTP(w, r)
			return
		}
		s.unauthorized(w)
	})
}

func (s *Server) unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="gorovod dashboard"`)
	http.Error(w, "unauthorized: this dashboard needs the token gorun printed", http.StatusUnauthorized)
}

// tokenOK compares in constant time (of the hashes, so the length of
// what was sent does not show either).
func (s *Server) tokenOK(got string) bool {
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) == 1
}

//go:embed page.html
var pageHTML []byte

// pageCSP allows the page's own inline script (by its hash) and style,
// and connections to this server only.
var pageCSP = func() string {
	script := between(string(pageHTML), "<script>", "</script>")
	sum := sha256.Sum256([]byte(script))
	return "default-src 'none'; script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
		"'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}()

func between(s, open, close string) string {
	_, rest, _ := strings.Cut(s, open)
	in, _, _ := strings.Cut(rest, close)
	return in
}

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Frame-Options", "DENY")
	w.Write(pageHTML)
}

func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) {
	b, err := marshalSnapshot(s.cfg.Source.Snapshot())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", PrometheusContentType)
	WritePrometheus(w, s.cfg.Source.Snapshot())
}

// tokenNeeded reports whether a server listening on addr needs a token.
func tokenNeeded(addr string, require bool) bool { return require || !IsLoopback(addr) }

// IsLoopback reports whether addr (host:port, a host, or a bracketed IPv6
// host) is on loopback: its host is empty, "localhost", or a loopback IP.
// Every other name counts as not loopback, without looking it up.
func IsLoopback(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	} else if strings.HasPrefix(addr, "[") && strings.HasSuffix(addr, "]") {
		host = addr[1 : len(addr)-1]
	}
	if host == "" || strings.EqualFold(host, "localhost") {
		return true
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	return false
}

// listenAddr is addr with an empty host made 127.0.0.1 and a lone port
// made host:port.
func listenAddr(addr string) (string, error) {
	if addr == "" {
		return "127.0.0.1:0", nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		if _, perr := net.LookupPort("tcp", addr); perr == nil {
			return net.JoinHostPort("127.0.0.1", addr), nil
		}
		return "", fmt.Errorf("dashboard: address %q: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// displayAddr is the host:port to print: the host asked for (a name reads
// better than the address it bound), with the port bound.
func displayAddr(asked string, bound net.Addr) string {
	_, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return bound.String()
	}
	host, _, err := net.SplitHostPort(asked)
	switch {
	case err != nil || host == "":
		host = "127.0.0.1"
	case host == "0.0.0.0" || host == "::":
		host, _ = osHostname()
	}
	return net.JoinHostPort(host, port)
}

// osHostname is os.Hostname, with "localhost" when it fails.
func osHostname() (string, error) {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost", err
	}
	return h, nil
}
