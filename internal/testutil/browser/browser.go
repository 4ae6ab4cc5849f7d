package browser

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testenv"
)

// Timeout bounds each wait of this package: the browser's start, its
// page target's appearance and each DevTools command. It is generous, for
// a loaded machine.
const Timeout = 60 * time.Second

// Find returns the path of Chromium (Debian's chromium, or
// chromium-browser or google-chrome) on PATH. Without one it skips t, or
// fails it when testenv.RequireTools is set.
func Find(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if testenv.Required(testenv.RequireTools) {
		t.Fatalf("no chromium here, and %s is set", testenv.RequireTools)
	}
	t.Skip("no chromium here (apt-get install chromium)")
	return ""
}

// Browser is a headless Chromium and a DevTools connection to its page.
// Its methods are not safe for concurrent use.
type Browser struct {
	cmd  *exec.Cmd
	conn net.Conn
	r    *bufio.Reader
	id   int
	once sync.Once
}

var devtoolsLine = regexp.MustCompile(`DevTools listening on (ws://[^\s]+)`)

// Start starts the Chromium at bin headless, with a 1400×1000 window and
// a DevTools port on loopback, and attaches to its page (about:blank). It
// fails t if the browser does not come up within Timeout. The browser is
// stopped, with every process it started, when t's cleanup runs, or
// earlier by Close.
func Start(t testing.TB, bin string) *Browser {
	t.Helper()
	cmd := exec.Command(bin, "--headless", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage",
		"--no-first-run", "--disable-extensions", "--disable-background-networking",
		"--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
		"--user-data-dir="+t.TempDir(), "--window-size=1400,1000", "about:blank")
	// /usr/bin/chromium is a shell script: its process group is killed,
	// browser and all. The script execs the browser, which the kernel
	// also kills if the test binary dies without cleaning up (a killed
	// go test left browsers running before).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b := &Browser{cmd: cmd}
	t.Cleanup(b.Close)
	wsURL := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			if m := devtoolsLine.FindStringSubmatch(sc.Text()); m != nil && !sent {
				wsURL <- m[1]
				sent = true
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	var browserURL string
	select {
	case browserURL = <-wsURL:
	case <-time.After(Timeout):
		t.Fatal("chromium printed no DevTools address")
	}
	u, err := url.Parse(browserURL)
	if err != nil {
		t.Fatal(err)
	}
	// The page target's own address.
	deadline := time.Now().Add(Timeout)
	for {
		var targets []struct{ Type, WebSocketDebuggerURL string }
		resp, err := http.Get("http://" + u.Host + "/json/list")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&targets)
			resp.Body.Close()
		}
		page := ""
		for _, tg := range targets {
			if tg.Type == "page" {
				page = tg.WebSocketDebuggerURL
			}
		}
		if page != "" {
			if err := b.dial(page); err != nil {
				t.Fatal(err)
			}
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("chromium has no page target: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Close stops the browser and every process it started. It is safe to
// call more than once.
func (b *Browser) Close() {
	b.once.Do(func() {
		if b.conn != nil {
			b.conn.Close()
		}
		syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		b.cmd.Wait()
	})
}

// Navigate loads url in the page. It returns when the navigation was
// committed, not when the page finished loading: wait for what the test
// expects to see with Eval.
func (b *Browser) Navigate(url string) error {
	var r struct {
		ErrorText string `json:"errorText"`
	}
	if err := b.Call("Page.navigate", map[string]any{"url": url}, &r); err != nil {
		return err
	}
	if r.ErrorText != "" {
		return fmt.Errorf("navigate to %s: %s", url, r.ErrorText)
	}
	return nil
}

// Reload reloads the page, bypassing the cache. Like Navigate it does not
// wait for the load.
func (b *Browser) Reload() error {
	return b.Call("Page.reload", map[string]any{"ignoreCache": true}, nil)
}

// Eval evaluates the JavaScript expression expr in the page and
// unmarshals its value, as JSON, into out. An exception thrown by expr is
// an error.
func (b *Browser) Eval(expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception *struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := b.Call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &r); err != nil {
		return err
	}
	if e := r.ExceptionDetails; e != nil {
		if e.Exception != nil && e.Exception.Description != "" {
			return fmt.Errorf("evaluate: %s: %s", e.Text, e.Exception.Description)
		}
		return fmt.Errorf("evaluate: %s", e.Text)
	}
	if len(r.Result.Value) == 0 {
		return errors.New("evaluate: the expression has no value")
	}
	return json.Unmarshal(r.Result.Value, out)
}

// Screenshot returns a PNG of the page's viewport.
func (b *Browser) Screenshot() ([]byte, error) {
	return b.screenshot(map[string]any{"format": "png"})
}

// FullScreenshot returns a PNG of the whole page: as wide as its content
// (the window less a scroll bar) and as tall.
func (b *Browser) FullScreenshot() ([]byte, error) {
	var m struct {
		CSSContentSize struct {
			Width, Height float64
		} `json:"cssContentSize"`
	}
	if err := b.Call("Page.getLayoutMetrics", nil, &m); err != nil {
		return nil, err
	}
	if m.CSSContentSize.Width <= 0 || m.CSSContentSize.Height <= 0 {
		return nil, fmt.Errorf("screenshot: the page measures %vx%v", m.CSSContentSize.Width, m.CSSContentSize.Height)
	}
	return b.screenshot(map[string]any{"format": "png", "captureBeyondViewport": true,
		"clip": map[string]any{"x": 0, "y": 0, "width": m.CSSContentSize.Width, "height": m.CSSContentSize.Height, "scale": 1}})
}

// screenshot runs Page.captureScreenshot with params.
func (b *Browser) screenshot(params map[string]any) ([]byte, error) {
	var shot struct{ Data string }
	if err := b.Call("Page.captureScreenshot", params, &shot); err != nil {
		return nil, err
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		return nil, fmt.Errorf("screenshot: %w", err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		return nil, fmt.Errorf("screenshot: %d bytes that are not a PNG", len(png))
	}
	return png, nil
}

// Call sends the DevTools command method with params and unmarshals its
// result into result (unless nil), skipping the events that come before
// it. It waits at most Timeout.
func (b *Browser) Call(method string, params any, result any) error {
	b.id++
	req, err := json.Marshal(map[string]any{"id": b.id, "method": method, "params": params})
	if err != nil {
		return err
	}
	b.conn.SetDeadline(time.Now().Add(Timeout))
	if err := b.send(req); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	for {
		msg, err := b.recv()
		if err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		var resp struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(msg, &resp); err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		if resp.ID != b.id {
			continue
		}
		if resp.Error != nil {
			return fmt.Errorf("%s: %s", method, resp.Error.Message)
		}
		if result == nil {
			return nil
		}
		return json.Unmarshal(resp.Result, result)
	}
}

// dial opens the WebSocket to a DevTools address.
func (b *Browser) dial(ws string) error {
	u, err := url.Parse(ws)
	if err != nil {
		return err
	}
	c, err := net.DialTimeout("tcp", u.Host, Timeout)
	if err != nil {
		return err
	}
	c.SetDeadline(time.Now().Add(Timeout))
	key := make([]byte, 16)
	rand.Read(key)
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", u.RequestURI(), u.Host, base64.StdEncoding.EncodeToString(key))
	b.r = bufio.NewReaderSize(c, 1<<16)
	resp, err := http.ReadResponse(b.r, nil)
	if err != nil {
		c.Close()
		return err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		c.Close()
		return fmt.Errorf("websocket handshake: %s", resp.Status)
	}
	b.conn = c
	return nil
}

// send writes one masked text frame, as a client must.
func (b *Browser) send(msg []byte) error {
	hdr := []byte{0x81}
	switch n := len(msg); {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n < 1<<16:
		hdr = append(hdr, 0x80|126, byte(n>>8), byte(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	mask := make([]byte, 4)
	rand.Read(mask)
	hdr = append(hdr, mask...)
	body := make([]byte, len(msg))
	for i := range msg {
		body[i] = msg[i] ^ mask[i%4]
	}
	_, err := b.conn.Write(append(hdr, body...))
	return err
}

// recv reads one whole message, its fragments joined.
func (b *Browser) recv() ([]byte, error) {
	var msg []byte
	for {
		var h [2]byte
		if _, err := io.ReadFull(b.r, h[:]); err != nil {
			return nil, err
		}
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var l [2]byte
			if _, err := io.ReadFull(b.r, l[:]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(l[:]))
		case 127:
			var l [8]byte
			if _, err := io.ReadFull(b.r, l[:]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(l[:])
		}
		if h[1]&0x80 != 0 {
			return nil, errors.New("websocket: masked frame from the server")
		}
		if n > 256<<20 {
			return nil, fmt.Errorf("websocket: a %d-byte frame", n)
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(b.r, payload); err != nil {
			return nil, err
		}
		switch op := h[0] & 0x0f; op {
		case 0x8:
			return nil, io.EOF
		case 0x9, 0xa: // ping, pong: Chromium sends none that must be answered
			continue
		}
		msg = append(msg, payload...)
		if h[0]&0x80 != 0 {
			return msg, nil
		}
	}
}
