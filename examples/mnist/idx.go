package main

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strings"
)

// An IDX file (the MNIST format) is a 4-byte magic number — two zero
// bytes, the element type (0x08: unsigned byte) and the number of
// dimensions — then each dimension as a big-endian uint32, then the
// elements in row-major order.
const idxUbyte = 0x08

// maxIDXElems bounds what a header may ask to allocate (1 GiB).
const maxIDXElems = 1 << 30

// readIDX reads an IDX file of unsigned bytes.
func readIDX(r io.Reader) (dims []int, data []byte, err error) {
	var magic [4]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil {
		return nil, nil, fmt.Errorf("idx: reading the magic number: %w", err)
	}
	if magic[0] != 0 || magic[1] != 0 || magic[2] != idxUbyte || magic[3] == 0 {
		return nil, nil, fmt.Errorf("idx: magic % x is not an unsigned-byte IDX file", magic)
	}
	dims = make([]int, magic[3])
	n := 1
	for i := range dims {
		var d uint32
		if err := binary.Read(r, binary.BigEndian, &d); err != nil {
			return nil, nil, fmt.Errorf("idx: reading dimension %d: %w", i, err)
		}
		dims[i] = int(d)
		if n *= dims[i]; n > maxIDXElems {
			return nil, nil, fmt.Errorf("idx: dimensions %v are too large", dims[:i+1])
		}
	}
	data = make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, nil, fmt.Errorf("idx: %v needs %d bytes of data: %w", dims, n, err)
	}
	return dims, data, nil
}

// readIDXFile reads path, or path+".gz" when path is absent, ungzipping
// files whose name ends in ".gz".
func readIDXFile(path string) ([]int, []byte, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) && !strings.HasSuffix(path, ".gz") {
		path += ".gz"
		f, err = os.Open(path)
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	var r io.Reader = bufio.NewReader(f)
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	dims, data, err := readIDX(r)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return dims, data, nil
}
