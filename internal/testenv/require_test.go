package testenv

import "testing"

func TestRequired(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "1": true, "yes": true} {
		t.Setenv(RequireSSHD, v)
		if got := Required(RequireSSHD); got != want {
			t.Errorf("%s=%q: Required = %v, want %v", RequireSSHD, v, got, want)
		}
	}
}
