package evaluator

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Result is one evaluation, written to Options.Out as one JSON line:
//
//	{"step":200,"epoch":1,"metrics":{"accuracy":0.93,"loss":0.21},"time":"2026-11-28T00:10:03.123456789Z","seconds":0.84,"file":"checkpoint-000000000200.ckpt"}
//
// json.Unmarshal of a line into a Result reads it back.
type Result struct {
	// Step is the checkpoint's step, as its file name gives it.
	Step int64 `json:"step"`
	// Epoch is the checkpoint's Epoch (the epoch its next step belongs to).
	Epoch int `json:"epoch"`
	// Metrics are what Options.Eval returned ({} for none).
	Metrics Metrics `json:"metrics"`
	// Time is when the evaluation ended, in UTC (RFC 3339 with
	// nanoseconds in JSON).
	Time time.Time `json:"time"`
	// Seconds is how long Options.Eval took.
	Seconds float64 `json:"seconds"`
	// File is the checkpoint's file name inside Options.Dir.
	File string `json:"file"`
}

// Metrics are an evaluation's named values. In JSON a finite value is a
// number and a non-finite one (a diverged loss) the string "NaN", "+Inf" or
// "-Inf", which JSON numbers cannot spell; reading accepts both forms.
type Metrics map[string]float64

// MarshalJSON writes m as a JSON object with sorted keys.
func (m Metrics) MarshalJSON() ([]byte, error) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch {
		case math.IsNaN(v):
			out[k] = "NaN"
		case math.IsInf(v, 1):
			out[k] = "+Inf"
		case math.IsInf(v, -1):
			out[k] = "-Inf"
		default:
			out[k] = v
		}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (m *Metrics) UnmarshalJSON(b []byte) error {
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	out := make(Metrics, len(raw))
	for k, v := range raw {
		switch v := v.(type) {
		case float64:
			out[k] = v
		case string:
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("evaluator: metric %q is %q, no number", k, v)
			}
			out[k] = f
		default:
			return fmt.Errorf("evaluator: metric %q is %v, no number", k, v)
		}
	}
	*m = out
	return nil
}
