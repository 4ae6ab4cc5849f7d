package main

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func idxBytes(dims []uint32, data []byte) []byte {
	b := []byte{0, 0, idxUbyte, byte(len(dims))}
	for _, d := range dims {
		b = append(b, byte(d>>24), byte(d>>16), byte(d>>8), byte(d))
	}
	return append(b, data...)
}

func TestReadIDX(t *testing.T) {
	data := []byte{1, 2, 3, 4, 5, 6}
	dims, got, err := readIDX(bytes.NewReader(idxBytes([]uint32{2, 3}, data)))
	if err != nil || !reflect.DeepEqual(dims, []int{2, 3}) || !bytes.Equal(got, data) {
		t.Fatalf("readIDX = %v %v %v", dims, got, err)
	}
	bad := map[string][]byte{
		"empty":     nil,
		"float":     {0, 0, 0x0d, 1, 0, 0, 0, 1, 0, 0, 0, 0},
		"no dims":   {0, 0, idxUbyte, 0},
		"short":     idxBytes([]uint32{2, 3}, data[:5]),
		"huge":      idxBytes([]uint32{1 << 16, 1 << 16}, nil),
		"cut dims":  idxBytes([]uint32{2, 3}, nil)[:9],
		"bad magic": {1, 0, idxUbyte, 1, 0, 0, 0, 0},
	}
	for name, b := range bad {
		if _, _, err := readIDX(bytes.NewReader(b)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestReadIDXFileFindsGzip(t *testing.T) {
	dir := t.TempDir()
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(idxBytes([]uint32{3}, []byte{7, 8, 9}))
	w.Close()
	os.WriteFile(filepath.Join(dir, "labels.gz"), gz.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, "plain"), idxBytes([]uint32{1}, []byte{5}), 0o644)
	if _, d, err := readIDXFile(filepath.Join(dir, "labels")); err != nil || !bytes.Equal(d, []byte{7, 8, 9}) {
		t.Errorf("gzip: %v %v", d, err)
	}
	if _, d, err := readIDXFile(filepath.Join(dir, "plain")); err != nil || d[0] != 5 {
		t.Errorf("plain: %v %v", d, err)
	}
	if _, _, err := readIDXFile(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("missing: %v", err)
	}
}

func TestLoadDataFallsBackToSynthetic(t *testing.T) {
	train, test, note, err := loadData(t.TempDir(), 100, 20, 1)
	if err != nil || train.len() != 100 || test.len() != 20 || !bytes.Contains([]byte(note), []byte("SYNTHETIC")) {
		t.Fatalf("%d/%d images, %q, %v", train.len(), test.len(), note, err)
	}
}
