package dashboard

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/gorovod/gorovod/internal/metrics"
)

// StepSecondsSeries is the runtime series whose spread per rank the
// summary draws.
const StepSecondsSeries = "hvd/step_seconds"

// Geometry of summary.svg: panels in two columns.
const (
	sumPanelW = 580
	sumPanelH = 260
	sumGap    = 20
	sumTitleH = 44
	sumCols   = 2
	// sumMaxPoints bounds the points drawn of one line.
	sumMaxPoints = 1200
)

var (
	lossName = regexp.MustCompile(`(?i)loss`)
	accName  = regexp.MustCompile(`(?i)acc`)
)

// IsThroughput reports whether a series is a collective throughput one,
// charted under "Collective throughput": a runtime series whose name
// starts with "hvd/busbw", or starts with "hvd/" and holds "bytes" (but
// not hvd/link_*, which the heat map shows).
func IsThroughput(kind metrics.Kind, name string) bool {
	if kind != metrics.Runtime || !strings.HasPrefix(name, "hvd/") || strings.HasPrefix(name, "hvd/link_") {
		return false
	}
	return strings.HasPrefix(name, "hvd/busbw") || strings.Contains(name, "bytes")
}

// panel is one chart of the summary: a line per rank.
type panel struct {
	title string
	lines []metrics.Series
}

// isPSChart reports whether a series is one of a parameter-server job's
// charted in summary.svg: a server's runtime series ("ps/server_*", a
// chart per name, so one per worker of ps/server_push_staleness/P) or a
// worker's staleness ("ps/staleness").
func isPSChart(kind metrics.Kind, name string) bool {
	return kind == metrics.Runtime && (strings.HasPrefix(name, "ps/server_") || name == "ps/staleness")
}

// WriteSummarySVG writes a standalone SVG (no script) of a job's
// metrics, for --metrics-dir's summary.svg: a chart of every scalar over
// steps, loss and accuracy first, a line per rank; the collective
// throughput series (see IsThroughput); a parameter-server job's server
// and staleness series (see isPSChart); and the spread of each rank's
// step time (min, median and max of hvd/step_seconds, or of a
// parameter-server worker's ps/step_seconds) as bars.
func WriteSummarySVG(w io.Writer, snap metrics.Snapshot) error {
	byName := map[string]*panel{}
	var scalars, throughput, servers []*panel
	var stepSeries, psStepSeries []metrics.Series
	for _, s := range snap.Series {
		if s.Kind == metrics.Runtime && s.Name == StepSecondsSeries {
			stepSeries = append(stepSeries, s)
			continue
		}
		if s.Kind == metrics.Runtime && s.Name == metrics.PSStepSecondsName {
			psStepSeries = append(psStepSeries, s)
			continue
		}
		group := &throughput
		switch {
		case s.Kind == metrics.Scalar:
			group = &scalars
		case isPSChart(s.Kind, s.Name):
			group = &servers
		case !IsThroughput(s.Kind, s.Name):
			continue
		}
		k := string(s.Kind) + "\x00" + s.Name
		p := byName[k]
		if p == nil {
			p = &panel{title: s.Name}
			byName[k] = p
			*group = append(*group, p)
		}
		p.lines = append(p.lines, s)
	}
	stepName := StepSecondsSeries
	if len(stepSeries) == 0 && len(psStepSeries) > 0 {
		stepSeries, stepName = psStepSeries, metrics.PSStepSecondsName
	}
	order := func(n string) int {
		switch {
		case lossName.MatchString(n):
			return 0
		case accName.MatchString(n):
			return 1
		}
		return 2
	}
	sort.SliceStable(scalars, func(i, j int) bool {
		oi, oj := order(scalars[i].title), order(scalars[j].title)
		if oi != oj {
			return oi < oj
		}
		return scalars[i].title < scalars[j].title
	})
	sort.Slice(throughput, func(i, j int) bool { return throughput[i].title < throughput[j].title })
	sort.Slice(servers, func(i, j int) bool { return lessPeerName(servers[i].title, servers[j].title) })
	for _, p := range append(append(append([]*panel(nil), scalars...), throughput...), servers...) {
		sort.Slice(p.lines, func(i, j int) bool { return p.lines[i].Rank < p.lines[j].Rank })
	}

	n := len(scalars) + len(throughput) + len(servers) + 1 // and the step-time spread
	rows := (n + sumCols - 1) / sumCols
	width := sumCols*sumPanelW + (sumCols+1)*sumGap
	height := sumTitleH + rows*(sumPanelH+sumGap) + sumGap

	b := bufio.NewWriter(w)
	fmt.Fprintf(b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	title := "gorovod"
	if snap.Job != "" {
		title += ": " + snap.Job
	}
	sub := fmt.Sprintf("%d ranks", len(snap.Ranks))
	if !snap.Start.IsZero() {
		sub += ", started " + snap.Start.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	if snap.Ended {
		sub += ", ended"
	}
	fmt.Fprintf(b, `<text x="%d" y="24" font-size="16" font-weight="bold">%s</text>`+"\n", sumGap, esc(title))
	fmt.Fprintf(b, `<text x="%d" y="38" fill="#656d76">%s</text>`+"\n", sumGap, esc(sub))

	i := 0
	at := func() (int, int) {
		x := sumGap + (i%sumCols)*(sumPanelW+sumGap)
		y := sumTitleH + sumGap + (i/sumCols)*(sumPanelH+sumGap)
		i++
		return x, y
	}
	for _, p := range scalars {
		x, y := at()
		linePanel(b, x, y, p, false)
	}
	for _, p := range throughput {
		x, y := at()
		linePanel(b, x, y, p, strings.Contains(p.title, "bytes"))
	}
	for _, p := range servers {
		x, y := at()
		linePanel(b, x, y, p, strings.Contains(p.title, "bytes"))
	}
	x, y := at()
	spreadPanel(b, x, y, stepSeries, stepName)
	b.WriteString("</svg>\n")
	return b.Flush()
}

// lessPeerName orders series names, those that end in a peer's number
// ("ps/server_push_staleness/10") by that number after the same name.
func lessPeerName(a, b string) bool {
	ab, ap, aok := metrics.SplitPeer(metrics.Runtime, a)
	bb, bp, bok := metrics.SplitPeer(metrics.Runtime, b)
	if aok && bok && ab == bb {
		return ap < bp
	}
	return a < b
}

func esc(s string) string {
	var sb strings.Builder
	xml.EscapeText(&sb, []byte(s))
	return sb.String()
}

// rankColor is rank's line colour; the page uses the same.
func rankColor(rank int) string {
	return fmt.Sprintf("hsl(%.1f,65%%,42%%)", math.Mod(float64(rank)*137.508, 360))
}

func fnum(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// label formats an axis value.
func label(v float64, bytes bool) string {
	if bytes {
		units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
		u := 0
		for math.Abs(v) >= 1024 && u < len(units)-1 {
			v /= 1024
			u++
		}
		return strconv.FormatFloat(v, 'g', 3, 64) + " " + units[u]
	}
	a := math.Abs(v)
	if a != 0 && (a >= 1e6 || a < 1e-3) {
		return strconv.FormatFloat(v, 'e', 2, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// ticks gives about n round values covering [lo, hi].
func ticks(lo, hi float64, n int) []float64 {
	if !(hi > lo) {
		return []float64{lo}
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		out = append(out, v)
	}
	return out
}

// frame draws a panel's box and title; the plot area is returned.
func frame(b *bufio.Writer, x, y int, title string) (px, py, pw, ph float64) {
	fmt.Fprintf(b, `<g><rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#d0d7de" rx="6"/>`+"\n", x, y, sumPanelW, sumPanelH)
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold" font-family="monospace">%s</text>`+"\n", x+10, y+18, esc(title))
	return float64(x + 60), float64(y + 28), float64(sumPanelW - 75), float64(sumPanelH - 60)
}

func linePanel(b *bufio.Writer, x, y int, p *panel, bytes bool) {
	px, py, pw, ph := frame(b, x, y, p.title)
	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymin, ymax := math.Inf(1), math.Inf(-1)
	for _, s := range p.lines {
		for k, st := range s.Steps {
			if k >= len(s.Values) || !finite(s.Values[k]) {
				continue
			}
			xmin, xmax = math.Min(xmin, float64(st)), math.Max(xmax, float64(st))
			ymin, ymax = math.Min(ymin, s.Values[k]), math.Max(ymax, s.Values[k])
		}
	}
	if math.IsInf(ymin, 1) {
		fmt.Fprintf(b, `<text x="%s" y="%s" fill="#656d76">no finite values</text></g>`+"\n", fnum(px), fnum(py+ph/2))
		return
	}
	if xmax == xmin {
		xmin, xmax = xmin-1, xmax+1
	}
	if ymax == ymin {
		d := math.Abs(ymin) * 0.1
		if d == 0 {
			d = 1
		}
		ymin, ymax = ymin-d, ymax+d
	}
	X := func(v float64) float64 { return px + (v-xmin)/(xmax-xmin)*pw }
	Y := func(v float64) float64 { return py + (1-(v-ymin)/(ymax-ymin))*ph }
	for _, t := range ticks(ymin, ymax, 4) {
		fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#eaeef2"/>`, fnum(px), fnum(px+pw), fnum(Y(t)), fnum(Y(t)))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end" fill="#656d76">%s</text>`+"\n", fnum(px-4), fnum(Y(t)+3), esc(label(t, bytes)))
	}
	for _, t := range ticks(xmin, xmax, 5) {
		if t != math.Round(t) {
			continue
		}
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" fill="#656d76">%s</text>`+"\n", fnum(X(t)), fnum(py+ph+14), strconv.FormatFloat(t, 'f', -1, 64))
	}
	fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" fill="#656d76">step</text>`+"\n", fnum(px+pw/2), fnum(py+ph+28))
	fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#d0d7de"/>`+"\n", fnum(px), fnum(py), fnum(pw), fnum(ph))
	for li, s := range p.lines {
		stride := max(1, len(s.Steps)/sumMaxPoints)
		var pts []string
		flush := func() {
			if len(pts) > 0 {
				fmt.Fprintf(b, `<polyline class="line" data-rank="%d" fill="none" stroke="%s" stroke-width="1.4" stroke-linecap="round" points="%s"/>`+"\n", s.Rank, rankColor(s.Rank), strings.Join(pts, " "))
			}
			pts = pts[:0]
		}
		for k := 0; k < len(s.Steps) && k < len(s.Values); k += stride {
			if !finite(s.Values[k]) {
				flush()
				continue
			}
			pts = append(pts, fnum(X(float64(s.Steps[k])))+","+fnum(Y(s.Values[k])))
		}
		if len(pts) == 1 {
			pts = append(pts, pts[0]) // a lone point still shows with the round cap
		}
		flush()
		if len(p.lines) > 1 && li < 16 {
			fmt.Fprintf(b, `<text x="%s" y="%d" text-anchor="end" fill="%s">r%d</text>`+"\n", fnum(float64(x+sumPanelW-10-(min(len(p.lines), 16)-1-li)*26)), y+18, rankColor(s.Rank), s.Rank)
		}
	}
	b.WriteString("</g>\n")
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// spreadPanel draws, per rank, a bar from the least to the greatest of
// its step times with a mark at the median.
func spreadPanel(b *bufio.Writer, x, y int, series []metrics.Series, name string) {
	px, py, pw, ph := frame(b, x, y, "step time per rank (min, median, max of "+name+")")
	type spread struct {
		rank        int
		lo, med, hi float64
	}
	var sp []spread
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		var v []float64
		for _, f := range s.Values {
			if finite(f) {
				v = append(v, f)
			}
		}
		if len(v) == 0 {
			continue
		}
		sort.Float64s(v)
		med := v[len(v)/2]
		if len(v)%2 == 0 {
			med = (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		sp = append(sp, spread{s.Rank, v[0], med, v[len(v)-1]})
		lo, hi = math.Min(lo, v[0]), math.Max(hi, v[len(v)-1])
	}
	if len(sp) == 0 {
		fmt.Fprintf(b, `<text x="%s" y="%s" fill="#656d76">no %s series</text></g>`+"\n", fnum(px), fnum(py+ph/2), name)
		return
	}
	sort.Slice(sp, func(i, j int) bool { return sp[i].rank < sp[j].rank })
	lo = 0 // bars from zero read truthfully
	if hi <= lo {
		hi = lo + 1
	}
	Y := func(v float64) float64 { return py + (1-(v-lo)/(hi-lo))*ph }
	for _, t := range ticks(lo, hi, 4) {
		fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#eaeef2"/>`, fnum(px), fnum(px+pw), fnum(Y(t)), fnum(Y(t)))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end" fill="#656d76">%s s</text>`+"\n", fnum(px-4), fnum(Y(t)+3), esc(label(t, false)))
	}
	fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#d0d7de"/>`+"\n", fnum(px), fnum(py), fnum(pw), fnum(ph))
	slot := pw / float64(len(sp))
	bw := math.Max(1, math.Min(28, slot*0.6))
	for k, s := range sp {
		cx := px + slot*(float64(k)+0.5)
		fmt.Fprintf(b, `<rect class="spread" data-rank="%d" x="%s" y="%s" width="%s" height="%s" fill="%s" fill-opacity="0.35"><title>rank %d: min %s s, median %s s, max %s s</title></rect>`+"\n",
			s.rank, fnum(cx-bw/2), fnum(Y(s.hi)), fnum(bw), fnum(math.Max(1, Y(s.lo)-Y(s.hi))), rankColor(s.rank),
			s.rank, label(s.lo, false), label(s.med, false), label(s.hi, false))
		fmt.Fprintf(b, `<line class="median" x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-width="2"/>`+"\n", fnum(cx-bw/2), fnum(cx+bw/2), fnum(Y(s.med)), fnum(Y(s.med)), rankColor(s.rank))
		if len(sp) <= 32 {
			fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" fill="#656d76">%d</text>`+"\n", fnum(cx), fnum(py+ph+14), s.rank)
		}
	}
	fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" fill="#656d76">rank</text>`+"\n", fnum(px+pw/2), fnum(py+ph+28))
	b.WriteString("</g>\n")
}
