package hvd

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// A checkpoint file is a 48-byte header followed by the gob encoding of a
// Checkpoint (the payload):
//
//	magic "GRVDCKP1" | payload length, uint64 big-endian | SHA-256 of the payload
//
// A file that is shorter or longer than the header says, or whose payload
// does not hash to the header's sum, is rejected.
const (
	checkpointMagic = "GRVDCKP1"
	headerLen       = len(checkpointMagic) + 8 + sha256.Size
)

// EncodeCheckpoint returns the file bytes of c: header and payload.
func EncodeCheckpoint(c *Checkpoint) ([]byte, error) {
	var payload bytes.Buffer
	if err := gob.NewEncoder(&payload).Encode(c); err != nil {
		return nil, fmt.Errorf("hvd: encoding a checkpoint: %w", err)
	}
	sum := sha256.Sum256(payload.Bytes())
	out := make([]byte, 0, headerLen+payload.Len())
	out = append(out, checkpointMagic...)
	out = binary.BigEndian.AppendUint64(out, uint64(payload.Len()))
	out = append(out, sum[:]...)
	return append(out, payload.Bytes()...), nil
}

// DecodeCheckpoint checks the header of file bytes b and decodes the
// payload; damage is reported as ErrBadCheckpoint.
func DecodeCheckpoint(b []byte) (*Checkpoint, error) {
	if len(b) < headerLen || string(b[:len(checkpointMagic)]) != checkpointMagic {
		return nil, fmt.Errorf("%w: no checkpoint header (%d bytes)", ErrBadCheckpoint, len(b))
	}
	n := binary.BigEndian.Uint64(b[len(checkpointMagic):])
	payload := b[headerLen:]
	if uint64(len(payload)) != n {
		return nil, fmt.Errorf("%w: header says %d bytes of payload, the file has %d (truncated?)", ErrBadCheckpoint, n, len(payload))
	}
	if sum := sha256.Sum256(payload); !bytes.Equal(sum[:], b[len(checkpointMagic)+8:headerLen]) {
		return nil, fmt.Errorf("%w: SHA-256 mismatch (corrupted)", ErrBadCheckpoint)
	}
	c := new(Checkpoint)
	if err := gob.NewDecoder(bytes.NewReader(payload)).Decode(c); err != nil {
		return nil, fmt.Errorf("%w: decoding: %w", ErrBadCheckpoint, err)
	}
	return c, nil
}

// ReadCheckpoint reads and checks the checkpoint file at path. It reads the
// header first and then at most the payload length it gives, plus one
// byte: a file that is no checkpoint (even an endless one such as
// /dev/zero) fails on its header, and memory follows the checkpoint's
// size, not the file's.
func ReadCheckpoint(path string) (*Checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("hvd: reading a checkpoint: %w", err)
	}
	defer f.Close()
	b, err := readCheckpointFile(f)
	if errors.Is(err, ErrBadCheckpoint) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("hvd: reading checkpoint %s: %w", path, err)
	}
	c, err := DecodeCheckpoint(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// readCheckpointFile returns the header of r and the payload that follows
// it, reading at most one byte more than the header's payload length: a
// longer file is an ErrBadCheckpoint. A short or foreign header is returned
// as it is, for DecodeCheckpoint to reject, without reading on.
func readCheckpointFile(r io.Reader) ([]byte, error) {
	head := make([]byte, headerLen)
	n, err := io.ReadFull(r, head)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || err == nil && string(head[:len(checkpointMagic)]) != checkpointMagic {
		return head[:n], nil
	}
	if err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint64(head[len(checkpointMagic):])
	if size >= math.MaxInt64-uint64(headerLen) {
		return head, nil
	}
	var b bytes.Buffer
	b.Write(head)
	if _, err := b.ReadFrom(io.LimitReader(r, int64(size)+1)); err != nil {
		return nil, err
	}
	if uint64(b.Len()-headerLen) > size {
		return nil, fmt.Errorf("%w: the file is longer than the %d bytes of payload its header gives", ErrBadCheckpoint, size)
	}
	return b.Bytes(), nil
}

// WriteCheckpoint writes c to path atomically: into a temporary file in
// the same directory, synced, renamed over path, and the directory synced,
// so that path holds either its old content or all of the new one, even
// across a crash or power loss.
func WriteCheckpoint(path string, c *Checkpoint) error {
	b, err := EncodeCheckpoint(c)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tmpPattern)
	if err != nil {
		return fmt.Errorf("hvd: writing a checkpoint: %w", err)
	}
	tmp := f.Name()
	if err := writeSync(f, b); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("hvd: writing checkpoint %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("hvd: writing a checkpoint: %w", err)
	}
	return syncDir(dir)
}

// tmpPattern names the temporary files of WriteCheckpoint.
const tmpPattern = ".checkpoint-*.tmp"

func writeSync(f *os.File, b []byte) error {
	_, err := f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("hvd: syncing checkpoint directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("hvd: syncing checkpoint directory %s: %w", dir, err)
	}
	return nil
}
