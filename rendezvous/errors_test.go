package rendezvous

import (
	"errors"
	"testing"
)

func TestDecodeRemoteKeepsSentinels(t *testing.T) {
	for _, s := range remoteSentinels {
		msg := s.Error() + ": details"
		err := decodeRemote(msg)
		if !errors.Is(err, s) || err.Error() != msg {
			t.Errorf("decodeRemote(%q) = %v, want %v with the same text", msg, err, s)
		}
	}
	if err := decodeRemote("gorpc.Dispatcher: unknown method [Rendezvous.X]"); !errors.Is(err, ErrProtocol) {
		t.Errorf("unknown server error = %v, want ErrProtocol", err)
	}
}
