package readlimit

import (
	"errors"
	"io"
	"os"
)

// ErrTooLarge is File's error for a file that holds more than the limit.
// Callers name the file and the limit in their own words.
var ErrTooLarge = errors.New("readlimit: larger than the limit")

// File returns the contents of the file at path if it holds at most max
// bytes, and ErrTooLarge if it holds more; it reads at most max+1 bytes.
func File(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, ErrTooLarge
	}
	return data, nil
}
