package dashboard

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/gorovod/gorovod/internal/metrics"
)

// The JSON the page reads: metrics' types, field for field, with every
// float a jfloat, since a loss that diverged (NaN, ±Inf) would make
// encoding/json fail on the whole snapshot.

// jfloat is a float64 that marshals a value that is not finite as null.
type jfloat float64

func (f jfloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

type wirePoint struct {
	Rank  int          `json:"rank"`
	Host  string       `json:"host,omitempty"`
	Step  int64        `json:"step"`
	Time  time.Time    `json:"time"`
	Kind  metrics.Kind `json:"kind"`
	Name  string       `json:"name"`
	Value jfloat       `json:"value"`
}

type wireRank struct {
	Rank        int            `json:"rank"`
	Host        string         `json:"host"`
	State       string         `json:"state"`
	Role        string         `json:"role,omitempty"`
	Step        int64          `json:"step"`
	StepSeconds jfloat         `json:"step_seconds"`
	CommShare   jfloat         `json:"comm_share"`
	LinkBytes   map[int]jfloat `json:"link_bytes,omitempty"`
	Dropped     int64          `json:"dropped"`
}

type wireSeries struct {
	Rank   int          `json:"rank"`
	Kind   metrics.Kind `json:"kind"`
	Name   string       `json:"name"`
	Steps  []int64      `json:"steps"`
	Values []jfloat     `json:"values"`
}

type wireSnapshot struct {
	Job    string          `json:"job"`
	Start  time.Time       `json:"start"`
	Ended  bool            `json:"ended"`
	Ranks  []wireRank      `json:"ranks"`
	Series []wireSeries    `json:"series"`
	Events []metrics.Event `json:"events"`
}

type wireUpdate struct {
	Points []wirePoint     `json:"points,omitempty"`
	Events []metrics.Event `json:"events,omitempty"`
	Ranks  []wireRank      `json:"ranks,omitempty"`
	Resync bool            `json:"resync,omitempty"`
	Ended  bool            `json:"ended,omitempty"`
}

func toWireRanks(rs []metrics.RankInfo) []wireRank {
	out := make([]wireRank, len(rs))
	for i, r := range rs {
		w := wireRank{Rank: r.Rank, Host: r.Host, State: r.State, Role: r.Role, Step: r.Step,
			StepSeconds: jfloat(r.StepSeconds), CommShare: jfloat(r.CommShare), Dropped: r.Dropped}
		if len(r.LinkBytes) > 0 {
			w.LinkBytes = make(map[int]jfloat, len(r.LinkBytes))
			for k, v := range r.LinkBytes {
				w.LinkBytes[k] = jfloat(v)
			}
		}
		out[i] = w
	}
	return out
}

func toWireFloats(vs []float64) []jfloat {
	out := make([]jfloat, len(vs))
	for i, v := range vs {
		out[i] = jfloat(v)
	}
	return out
}

// marshalSnapshot is snap as the page reads it.
func marshalSnapshot(snap metrics.Snapshot) ([]byte, error) {
	w := wireSnapshot{Job: snap.Job, Start: snap.Start, Ended: snap.Ended,
		Ranks: toWireRanks(snap.Ranks), Series: make([]wireSeries, len(snap.Series)), Events: snap.Events}
	if w.Events == nil {
		w.Events = []metrics.Event{}
	}
	for i, s := range snap.Series {
		steps := s.Steps
		if steps == nil {
			steps = []int64{}
		}
		w.Series[i] = wireSeries{Rank: s.Rank, Kind: s.Kind, Name: s.Name, Steps: steps, Values: toWireFloats(s.Values)}
	}
	return json.Marshal(w)
}

// marshalUpdate is u as the page reads it. Nothing in it can fail to
// marshal.
func marshalUpdate(u metrics.Update) []byte {
	w := wireUpdate{Events: u.Events, Resync: u.Resync, Ended: u.Ended}
	if len(u.Ranks) > 0 {
		w.Ranks = toWireRanks(u.Ranks)
	}
	if len(u.Points) > 0 {
		w.Points = make([]wirePoint, len(u.Points))
		for i, p := range u.Points {
			w.Points[i] = wirePoint{Rank: p.Rank, Host: p.Host, Step: p.Step, Time: p.Time, Kind: p.Kind, Name: p.Name, Value: jfloat(p.Value)}
		}
	}
	b, err := json.Marshal(w)
	if err != nil {
		// Only a time outside years 0–9999 can get here.
		return []byte(`{"resync":true}`)
	}
	return b
}
