package runner

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testutil"
)

// collect returns a lineWriter that records what it emits.
func collect() (*lineWriter, *[]string) {
	var lines []string
	return newLineWriter(func(line []byte) { lines = append(lines, string(line)) }), &lines
}

func TestLineWriterAnyChunking(t *testing.T) {
	const text = "a\nbb\n\nccc"
	want := []string{"a\n", "bb\n", "\n", "ccc"}
	for i := 0; i <= len(text); i++ {
		for j := i; j <= len(text); j++ {
			w, lines := collect()
			for _, chunk := range []string{text[:i], text[i:j], text[j:]} {
				if n, err := w.Write([]byte(chunk)); n != len(chunk) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", chunk, n, err)
				}
			}
			w.Flush()
			w.Flush() // nothing left: no second emit
			if !slices.Equal(*lines, want) {
				t.Errorf("splits %d,%d: lines %q, want %q", i, j, *lines, want)
			}
		}
	}
}

func TestLineWriterLongLine(t *testing.T) {
	w, lines := collect()
	long := strings.Repeat("x", 2*maxLineLen+5)
	_, _ = w.Write([]byte(long[:10]))
	_, _ = w.Write([]byte(long[10:] + "\nend\n"))
	want := []string{long[:maxLineLen], long[maxLineLen : 2*maxLineLen], "xxxxx\n", "end\n"}
	if !slices.Equal(*lines, want) {
		t.Errorf("got %d pieces of lengths %v, want lengths %d, %d, 6, 4",
			len(*lines), lengths(*lines), maxLineLen, maxLineLen)
	}
}

func lengths(s []string) []int {
	n := make([]int, len(s))
	for i := range s {
		n[i] = len(s[i])
	}
	return n
}

func TestOutputLinesNeverMix(t *testing.T) {
	const ranks, lines = 8, 120
	var term testutil.SyncBuffer
	out, err := newOutput(&term, &term, "", ranks, outputOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for r := range ranks {
		ro, err := out.open(r)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { // one rank writing in odd-sized chunks
			var text strings.Builder
			for i := range lines {
				fmt.Fprintf(&text, "rank %d line %d %s\n", r, i, strings.Repeat("z", i%37))
			}
			b := []byte(text.String())
			for len(b) > 0 {
				n := min(len(b), 1+(r*7+len(b))%23)
				_, _ = ro.Stdout.Write(b[:n])
				b = b[n:]
			}
			_ = ro.close()
		})
	}
	wg.Wait()
	re := regexp.MustCompile(`^\[(\d)\]<stdout>: rank (\d) line (\d+) z*$`)
	next := make([]int, ranks)
	for _, line := range strings.Split(strings.TrimSuffix(term.String(), "\n"), "\n") {
		m := re.FindStringSubmatch(line)
		if m == nil || m[1] != m[2] {
			t.Fatalf("mixed or malformed line %q", line)
		}
		r, _ := strconv.Atoi(m[1])
		if i, _ := strconv.Atoi(m[3]); i != next[r] {
			t.Fatalf("rank %d: line %d out of order (want %d)", r, i, next[r])
		}
		next[r]++
	}
	for r, n := range next {
		if n != lines {
			t.Errorf("rank %d: %d lines, want %d", r, n, lines)
		}
	}
}

func TestOutputEmptyLineAndDirNames(t *testing.T) {
	var term testutil.SyncBuffer
	dir := t.TempDir()
	out, err := newOutput(&term, &term, dir, 12, outputOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ro, err := out.open(3)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = ro.Stderr.Write([]byte("\nx\n"))
	if err := ro.close(); err != nil {
		t.Fatal(err)
	}
	if got, want := term.String(), "[3]<stderr>:\n[3]<stderr>: x\n"; got != want {
		t.Errorf("terminal = %q, want %q", got, want)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "rank.03", "stderr")); err != nil || string(got) != "\nx\n" {
		t.Errorf("rank.03/stderr = %q, %v", got, err)
	}
}

// TestOutputRanksAndTimestamps: the terminal shows only the ranks asked
// for, each line after the time, while every rank's file gets its lines
// as they were.
func TestOutputRanksAndTimestamps(t *testing.T) {
	var term testutil.SyncBuffer
	dir := t.TempDir()
	at := time.Date(2026, 11, 24, 11, 5, 7, 123456789, time.UTC)
	out, err := newOutput(&term, &term, dir, 3, outputOptions{ranks: []int{0, 2}, now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	for r := range 3 {
		ro, err := out.open(r)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(ro.Stdout, "hello from %d\n", r)
		if err := ro.close(); err != nil {
			t.Fatal(err)
		}
	}
	want := "2026-11-24T11:05:07.123Z [0]<stdout>: hello from 0\n2026-11-24T11:05:07.123Z [2]<stdout>: hello from 2\n"
	if got := term.String(); got != want {
		t.Errorf("terminal = %q, want %q", got, want)
	}
	for r := range 3 {
		got, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank.%02d", r), "stdout"))
		if want := fmt.Sprintf("hello from %d\n", r); err != nil || string(got) != want {
			t.Errorf("rank.%02d/stdout = %q, %v; want %q", r, got, err, want)
		}
	}
}

// TestOutputDirWidth: rank directories are zero-padded to two digits at
// least, and to the digits of the highest rank beyond that, so that they
// sort in rank order.
func TestOutputDirWidth(t *testing.T) {
	for _, tc := range []struct {
		size, rank int
		want       string
	}{
		{1, 0, "rank.00"}, {4, 3, "rank.03"}, {10, 9, "rank.09"}, {100, 99, "rank.99"},
		{101, 7, "rank.007"}, {101, 100, "rank.100"}, {1001, 42, "rank.0042"},
	} {
		dir := t.TempDir()
		out, err := newOutput(io.Discard, io.Discard, dir, tc.size, outputOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ro, err := out.open(tc.rank)
		if err != nil {
			t.Fatal(err)
		}
		if err := ro.close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, tc.want, "stdout")); err != nil {
			t.Errorf("size %d, rank %d: want %s/stdout: %v", tc.size, tc.rank, tc.want, err)
		}
	}
}
