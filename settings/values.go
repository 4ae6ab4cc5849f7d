package settings

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// The Values of the knobs: as the GOROVOD_ variables spell them (durations
// in Go syntax, decimal integers, 1 or 0), and where gorun's flag spells
// them otherwise (MiB, milliseconds, seconds). Their errors do not repeat
// the text they were given; the caller names it.

// durationField is a Go duration ("1ms", "60s", "1m30s").
func durationField(field func(*Knobs) *time.Duration) func(*Knobs) Value {
	return func(k *Knobs) Value { return durationValue{field(k)} }
}

type durationValue struct{ p *time.Duration }

func (v durationValue) String() string { return v.p.String() }

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New(`not a Go duration such as "1ms", "60s" or "1m30s"`)
	}
	*v.p = d
	return nil
}

// secondsField is a Go duration or a number of seconds ("90s", "90", "0.5").
func secondsField(field func(*Knobs) *time.Duration) func(*Knobs) Value {
	return func(k *Knobs) Value { return secondsValue{field(k)} }
}

type secondsValue struct{ p *time.Duration }

func (v secondsValue) String() string { return v.p.String() }

func (v secondsValue) Set(s string) error {
	d, err := ParseSeconds(s)
	if err != nil {
		return err
	}
	*v.p = d
	return nil
}

// maxSeconds is the longest duration in seconds.
const maxSeconds = float64(math.MaxInt64 / int64(time.Second))

// ParseSeconds reads a Go duration ("90s", "1m30s") or a number of seconds
// ("90", "0.5"), as gorun's duration flags take them.
func ParseSeconds(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	secs, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(secs) || math.Abs(secs) > maxSeconds {
		return 0, errors.New("want a duration such as 30s or 1m30s, or seconds")
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// int64Field and intField are decimal integers.
func int64Field(field func(*Knobs) *int64) func(*Knobs) Value {
	return func(k *Knobs) Value { return intValue[int64]{field(k)} }
}

func intField(field func(*Knobs) *int) func(*Knobs) Value {
	return func(k *Knobs) Value { return intValue[int]{field(k)} }
}

type intValue[T int | int64] struct{ p *T }

func (v intValue[T]) String() string { return strconv.FormatInt(int64(*v.p), 10) }

func (v intValue[T]) Set(s string) error {
	n, err := ParseInt[T](s)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}

// ParseInt parses a decimal integer, explaining a failure without
// repeating s.
func ParseInt[T int | int64](s string) (T, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err == nil && int64(T(n)) != n || errors.Is(err, strconv.ErrRange) {
		return 0, errors.New("integer out of range")
	}
	if err != nil {
		return 0, errors.New("not a decimal integer")
	}
	return T(n), nil
}

// textField is text taken as is.
func textField(field func(*Knobs) *string) func(*Knobs) Value {
	return func(k *Knobs) Value { return textValue{field(k)} }
}

type textValue struct{ p *string }

func (v textValue) String() string { return *v.p }

func (v textValue) Set(s string) error { *v.p = s; return nil }

// boolValue is written 1 (set) or 0 (unset).
type boolValue struct{ p *bool }

func (v boolValue) String() string {
	if *v.p {
		return "1"
	}
	return "0"
}

func (v boolValue) Set(s string) error {
	switch s {
	case "1":
		*v.p = true
	case "0":
		*v.p = false
	default:
		return errors.New("not 1 or 0")
	}
	return nil
}

// switchValue is a Switch written auto, on or off.
type switchValue struct{ p *Switch }

func (v switchValue) String() string { return v.p.String() }

func (v switchValue) Set(s string) error {
	sw, err := ParseSwitch(s)
	if err != nil {
		return errors.New("not auto, on or off")
	}
	*v.p = sw
	return nil
}

// Flag spellings. Each keeps what it was given, so that Check can name a
// value out of range as it was written; errors of Set are those of the
// flag package's numbers ("parse error", "value out of range").

var (
	errParse = errors.New("parse error")
	errRange = errors.New("value out of range")
)

// numError turns a strconv error into the flag package's.
func numError(err error) error {
	if errors.Is(err, strconv.ErrRange) {
		return errRange
	}
	return errParse
}

// maxMiB is the largest --fusion-threshold-mb.
const maxMiB = 1 << 20

// mibValue is an integer number of MiB of an int64 number of bytes.
type mibValue struct {
	p  *int64
	mb int64 // as given
}

func (v *mibValue) String() string { return strconv.FormatInt(*v.p>>20, 10) }

func (v *mibValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		return numError(err)
	}
	v.mb = n
	if 0 <= n && n <= maxMiB {
		*v.p = n << 20
	}
	return nil
}

func (v *mibValue) Check() error {
	if v.mb < 0 || v.mb > maxMiB {
		return fmt.Errorf("%d: want 0..%d", v.mb, maxMiB)
	}
	return nil
}

// msValue is a number of milliseconds of a duration.
type msValue struct {
	p  *time.Duration
	ms float64 // as given
}

func (v *msValue) String() string {
	return strconv.FormatFloat(float64(*v.p)/float64(time.Millisecond), 'g', -1, 64)
}

func (v *msValue) Set(s string) error {
	ms, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return numError(err)
	}
	v.ms = ms
	if v.Check() == nil {
		*v.p = time.Duration(ms * float64(time.Millisecond))
	}
	return nil
}

func (v *msValue) Check() error {
	if !(v.ms > 0 && v.ms < 1e9) {
		return fmt.Errorf("%g: want a positive number of milliseconds", v.ms)
	}
	return nil
}

// switchFlag is a Switch as gorun's flag takes it: any word, checked once
// the command line is read.
type switchFlag struct {
	p    *Switch
	text string // as given
}

func (v *switchFlag) String() string { return v.p.String() }

func (v *switchFlag) Set(s string) error {
	v.text = s
	if sw, err := ParseSwitch(s); err == nil {
		*v.p = sw
	}
	return nil
}

func (v *switchFlag) Check() error {
	if _, err := ParseSwitch(v.text); err != nil {
		return fmt.Errorf("%q: want on, off or auto", v.text)
	}
	return nil
}
