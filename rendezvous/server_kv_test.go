package rendezvous

import (
	"testing"
	"time"
)

// TestServerValueAndChanged: the launcher reads what a rank Set, and
// Changed fires for a registration, a Set and an abort.
func TestServerValueAndChanged(t *testing.T) {
	secret := newSecret(t)
	s := startServer(t, ServerConfig{Secret: secret, Size: 2})
	ctx := ctxFor(t, 5*time.Second)
	c, err := Dial(ctx, s.Addr(), secret)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fired := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}

	if v, ok := s.Value("k"); ok || v != nil {
		t.Errorf("Value before Set = %q, %v; want nothing", v, ok)
	}
	ch := s.Changed()
	if fired(ch) {
		t.Fatal("Changed fired before any change")
	}
	if err := c.Set(ctx, "k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if !fired(ch) {
		t.Error("Changed did not fire after Set")
	}
	v, ok := s.Value("k")
	if !ok || string(v) != "v1" {
		t.Errorf("Value = %q, %v; want v1", v, ok)
	}
	v[0] = 'X' // a copy: the store keeps its value
	if v, _ := s.Value("k"); string(v) != "v1" {
		t.Errorf("Value after changing the returned slice = %q, want v1", v)
	}

	ch = s.Changed()
	if err := c.Register(ctx, 1, "h", "127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	if !fired(ch) {
		t.Error("Changed did not fire after Register")
	}
	ch = s.Changed()
	s.Abort("test")
	if !fired(ch) {
		t.Error("Changed did not fire after Abort")
	}
	if v, ok := s.Value("k"); !ok || string(v) != "v1" {
		t.Errorf("Value after Abort = %q, %v; want v1", v, ok)
	}
}
