package browser

import (
	"bytes"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestBrowser loads a page that counts its loads, reads its DOM, reloads
// it, and takes a screenshot.
func TestBrowser(t *testing.T) {
	bin := Find(t)
	var loads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" { // the favicon
			http.NotFound(w, r)
			return
		}
		n := loads.Add(1)
		fmt.Fprintf(w, `<!doctype html><title>t</title><body><p id="n">%d</p><script>document.body.dataset.ready = "yes"</script>`, n)
	}))
	defer srv.Close()
	b := Start(t, bin)
	if err := b.Navigate(srv.URL); err != nil {
		t.Fatal(err)
	}
	type state struct {
		Ready string `json:"ready"`
		N     string `json:"n"`
	}
	const read = `({ready: document.body ? (document.body.dataset.ready || "") : "", n: (document.getElementById("n") || {}).textContent || ""})`
	wait := func(want string) {
		t.Helper()
		var s state
		for deadline := time.Now().Add(Timeout); ; time.Sleep(50 * time.Millisecond) {
			if err := b.Eval(read, &s); err != nil {
				t.Fatal(err)
			}
			if s.Ready == "yes" && s.N == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("page %+v, want load %s", s, want)
			}
		}
	}
	wait("1")
	if err := b.Reload(); err != nil {
		t.Fatal(err)
	}
	wait("2")

	var sum int
	if err := b.Eval("[1, 2, 3].reduce((a, b) => a + b)", &sum); err != nil || sum != 6 {
		t.Errorf("eval: %d, %v", sum, err)
	}
	if err := b.Eval("(() => { throw new Error('boom') })()", &sum); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("an exception: %v", err)
	}
	if err := b.Call("No.such", nil, nil); err == nil {
		t.Error("an unknown method: no error")
	}
	shot, err := b.Screenshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(shot) < 100 {
		t.Errorf("a %d-byte screenshot", len(shot))
	}
	// A page taller than the window: all of it.
	if err := b.Eval(`(() => { document.body.style.height = "3000px"; return true })()`, new(bool)); err != nil {
		t.Fatal(err)
	}
	full, err := b.FullScreenshot()
	if err != nil {
		t.Fatal(err)
	}
	if w, h := pngSize(t, shot); w != 1400 || h >= 3000 {
		t.Errorf("the viewport's screenshot is %dx%d", w, h)
	}
	// As wide as the window less its scroll bar.
	if w, h := pngSize(t, full); w > 1400 || w < 1300 || h < 3000 {
		t.Errorf("the full page's screenshot is %dx%d, want about 1400 wide and 3000 or more tall", w, h)
	}
	b.Close()
	b.Close()
}

// pngSize decodes the size of a PNG.
func pngSize(t *testing.T, b []byte) (int, int) {
	t.Helper()
	c, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return c.Width, c.Height
}
