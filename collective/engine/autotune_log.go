package engine

import (
	"encoding/csv"
	"io"
	"strconv"
)

// tuneLogHeader names the columns of the autotuning log.
var tuneLogHeader = []string{"trial", "fusion_bytes", "cycle_ms", "hierarchical", "cache",
	"bytes", "seconds", "bytes_per_s"}

// tuneLog writes rank 0's autotuning trials as CSV: the header, one row per
// trial as it ends, and a last row whose trial column reads "chosen", with
// the chosen setting and its measurement. Each row is flushed at once, so
// the file can be read while the job runs. A write error stops the log
// and is kept for err.
type tuneLog struct {
	w   *csv.Writer
	err error
}

func newTuneLog(w io.Writer) *tuneLog {
	l := &tuneLog{w: csv.NewWriter(w)}
	l.write(tuneLogHeader)
	return l
}

// trial writes one trial's row.
func (l *tuneLog) trial(t tuneTrial) { l.write(tuneRow(strconv.Itoa(t.index), t)) }

// chosen writes the last row: the chosen trial.
func (l *tuneLog) chosen(t tuneTrial) { l.write(tuneRow("chosen", t)) }

func tuneRow(label string, t tuneTrial) []string {
	s := t.set
	return []string{label,
		strconv.FormatInt(s.fusion, 10),
		strconv.FormatFloat(float64(s.cycle.Microseconds())/1000, 'f', -1, 64),
		hierName(s.hier),
		onOff(s.cache > 0),
		strconv.FormatInt(t.bytes, 10),
		strconv.FormatFloat(t.elapsed.Seconds(), 'f', 6, 64),
		strconv.FormatFloat(t.score(), 'f', 0, 64),
	}
}

func (l *tuneLog) write(row []string) {
	if l.err != nil {
		return
	}
	if l.err = l.w.Write(row); l.err == nil {
		l.w.Flush()
		l.err = l.w.Error()
	}
}
