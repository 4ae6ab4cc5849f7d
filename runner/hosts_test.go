package runner

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseHosts(t *testing.T) {
	tests := []struct {
		in   string
		want []Host
	}{
		{"a", []Host{{"a", 1}}},
		{"a:2", []Host{{"a", 2}}},
		{"host1:2,host2:4", []Host{{"host1", 2}, {"host2", 4}}},
		{" a:2 ,\tb , c:3 ", []Host{{"a", 2}, {"b", 1}, {"c", 3}}},
		{"node-1.example.com:8,gpu_box:02", []Host{{"node-1.example.com", 8}, {"gpu_box", 2}}},
		{"10.0.0.1:4,10.0.0.2", []Host{{"10.0.0.1", 4}, {"10.0.0.2", 1}}},
		{"[::1]:2", []Host{{"::1", 2}}},
		{"[::1]", []Host{{"::1", 1}}},
		{"[0:0:0:0:0:0:0:1]:3,[FD00::7]", []Host{{"::1", 3}, {"fd00::7", 1}}},
		{"[fe80::1%eth0]:2", []Host{{"fe80::1%eth0", 2}}},
		{"a:65536", []Host{{"a", MaxSlotsPerHost}}},
	}
	for _, tt := range tests {
		got, err := ParseHosts(tt.in)
		if err != nil {
			t.Errorf("ParseHosts(%q): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseHosts(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestParseHostsErrors(t *testing.T) {
	tests := []struct {
		in   string
		want []string // substrings of the message
	}{
		{"", []string{"no hosts"}},
		{"  ", []string{"no hosts"}},
		{"a:2,,b", []string{`item 2 ""`, "empty item"}},
		{"a:2,", []string{`item 2 ""`, "empty item"}},
		{",a", []string{`item 1 ""`}},
		{"a:0", []string{`"a:0"`, "at least 1"}},
		{"a:-1", []string{`"a:-1"`, "not a positive integer"}},
		{"a:+1", []string{`"a:+1"`, "not a positive integer"}},
		{"a:x", []string{`"a:x"`, `"x" is not a positive integer`}},
		{"a:1.5", []string{`"a:1.5"`}},
		{"a:", []string{`"a:"`, "missing slot count"}},
		{"a:65537", []string{"exceeds the limit"}},
		{"a:99999999999999999999999", []string{"exceeds the limit"}},
		{"b:2,a:1,b:1", []string{`item 3 "b:1"`, `duplicate host "b" (also item 1)`}},
		{"Node:1,node:1", []string{`duplicate host "node"`}},
		{"[::1]:1,[0::1]:2", []string{`duplicate host "::1"`}},
		{":2", []string{"empty host name"}},
		{"a b:2", []string{`"a b:2"`, `character ' '`}},
		{"::1:2", []string{"brackets"}},
		{"fe80::1", []string{"brackets"}},
		{"[::1", []string{"missing ']'"}},
		{"[::1]2", []string{"expected ':' after ']'"}},
		{"[1.2.3.4]:2", []string{"not an IPv6 address"}},
		{"[nothost]:2", []string{"not an IPv6 address"}},
		{"[fe80::1%a/b]:2", []string{"zone"}},
		{"-oProxyCommand=x:1", []string{"must not start with"}},
		{".a:1", []string{"must not start with"}},
		{"user@host:2", []string{`character '@'`}},
		{"h\u00e9:1", []string{"not allowed"}},
		{strings.Repeat("a", 254), []string{"longer than 253"}},
	}
	for _, tt := range tests {
		_, err := ParseHosts(tt.in)
		if err == nil {
			t.Errorf("ParseHosts(%q): no error", tt.in)
			continue
		}
		if !errors.Is(err, ErrHosts) {
			t.Errorf("ParseHosts(%q): %v does not wrap ErrHosts", tt.in, err)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "runner: ") {
			t.Errorf("ParseHosts(%q): %q lacks the package prefix", tt.in, msg)
		}
		for _, w := range tt.want {
			if !strings.Contains(msg, w) {
				t.Errorf("ParseHosts(%q) error %q does not contain %q", tt.in, msg, w)
			}
		}
	}
}

func TestFormatHosts(t *testing.T) {
	hosts := []Host{{"a", 2}, {"::1", 1}, {"fe80::1%eth0", 3}, {"10.0.0.1", 4}}
	want := "a:2,[::1]:1,[fe80::1%eth0]:3,10.0.0.1:4"
	if got := FormatHosts(hosts); got != want {
		t.Fatalf("FormatHosts = %q, want %q", got, want)
	}
	back, err := ParseHosts(want)
	if err != nil || !reflect.DeepEqual(back, hosts) {
		t.Fatalf("ParseHosts(FormatHosts) = %v, %v; want %v", back, err, hosts)
	}
	if got := TotalSlots(hosts); got != 10 {
		t.Fatalf("TotalSlots = %d, want 10", got)
	}
}

func FuzzParseHosts(f *testing.F) {
	for _, s := range []string{
		"a", "a:2,b:4", " a:2 , b ", "[::1]:2", "[fe80::1%eth0]:3", "a:0", "a,,b",
		"a:2,a:3", "[::1", "::1:2", "x:99999999999", "-a:1", "A:1,a:1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hosts, err := ParseHosts(s)
		if err != nil {
			if !errors.Is(err, ErrHosts) || !strings.HasPrefix(err.Error(), "runner: ") {
				t.Fatalf("ParseHosts(%q): badly formed error %v", s, err)
			}
			return
		}
		if len(hosts) == 0 {
			t.Fatalf("ParseHosts(%q) returned no hosts and no error", s)
		}
		for _, h := range hosts {
			if h.Name == "" || h.Slots < 1 || h.Slots > MaxSlotsPerHost {
				t.Fatalf("ParseHosts(%q) returned bad host %+v", s, h)
			}
		}
		again, err := ParseHosts(FormatHosts(hosts))
		if err != nil || !reflect.DeepEqual(again, hosts) {
			t.Fatalf("ParseHosts(%q) = %v; re-parsed %q = %v, %v", s, hosts, FormatHosts(hosts), again, err)
		}
		if _, err := Assign(hosts, TotalSlots(hosts)); err != nil {
			t.Fatalf("Assign(%v) of parsed hosts: %v", hosts, err)
		}
	})
}
