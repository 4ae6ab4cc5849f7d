package dashboard

import (
	"bufio"
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
	"syscall"
	"testing"
	"time"
)

// A tiny client of Chromium's DevTools protocol over a WebSocket written
// here (this module has no WebSocket package): enough to load a page,
// evaluate script in it, reload it and take a screenshot.

// browser is a headless Chromium and a connection to its page.
type browser struct {
	cmd  *exec.Cmd
	conn net.Conn
	r    *bufio.Reader
	id   int
}

var devtoolsLine = regexp.MustCompile(`DevTools listening on (ws://[^\s]+)`)

// startBrowser starts bin headless with a DevTools port and attaches to
// its page; it is stopped, with every process it started, at cleanup.
func startBrowser(t *testing.T, bin string) *browser {
	t.Helper()
	cmd := exec.Command(bin, "--headless", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage",
		"--no-first-run", "--disable-extensions", "--disable-background-networking",
		"--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
		"--user-data-dir="+t.TempDir(), "--window-size=1400,1000", "about:blank")
	// /usr/bin/chromium is a shell script: its group is killed, browser
	// and all.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b := &browser{cmd: cmd}
	t.Cleanup(func() {
		if b.conn != nil {
			b.conn.Close()
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
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
	case <-time.After(60 * time.Second):
		t.Fatal("chromium printed no DevTools address")
	}
	u, err := url.Parse(browserURL)
	if err != nil {
		t.Fatal(err)
	}
	// The page target's own address.
	var targets []struct{ Type, WebSocketDebuggerURL string }
	deadline := time.Now().Add(60 * time.Second)
	for {
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
			t.Fatalf("no page target: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// dial opens the WebSocket (RFC 6455) to a DevTools address.
func (b *browser) dial(ws string) error {
	u, err := url.Parse(ws)
	if err != nil {
		return err
	}
	c, err := net.DialTimeout("tcp", u.Host, 30*time.Second)
	if err != nil {
		return err
	}
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

// send writes one masked text frame.
func (b *browser) send(msg []byte) error {
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

// recv reads one whole message (its fragments joined).
func (b *browser) recv() ([]byte, error) {
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
		payload := make([]byte, n)
		if _, err := io.ReadFull(b.r, payload); err != nil {
			return nil, err
		}
		switch op := h[0] & 0x0f; op {
		case 0x8:
			return nil, io.EOF
		case 0x9, 0xa: // ping, pong: Chromium sends none we must answer
			continue
		}
		msg = append(msg, payload...)
		if h[0]&0x80 != 0 {
			return msg, nil
		}
	}
}

// call sends a DevTools command and returns its result, skipping events.
func (b *browser) call(method string, params any, result any) error {
	b.id++
	req, err := json.Marshal(map[string]any{"id": b.id, "method": method, "params": params})
	if err != nil {
		return err
	}
	b.conn.SetDeadline(time.Now().Add(60 * time.Second))
	if err := b.send(req); err != nil {
		return err
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
			return err
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

// eval evaluates expr in the page and unmarshals its value into out.
func (b *browser) eval(expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := b.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &r); err != nil {
		return err
	}
	if r.ExceptionDetails != nil {
		return fmt.Errorf("evaluate: %s", r.ExceptionDetails.Text)
	}
	return json.Unmarshal(r.Result.Value, out)
}
