package engine

import (
	"bufio"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/kernels"
)

// rewrite regenerates the expected outputs of testdata/*.txt from what the
// negotiators decide: go test -run TestTranscripts -rewrite. Read the diff
// before committing it.
var rewrite = flag.Bool("rewrite", false, "rewrite the expected outputs of the negotiator transcripts")

// TestTranscripts runs the negotiator transcripts in testdata: per-rank
// inputs (submissions, joins, the clock, cycles) and the decisions every
// rank reaches, in the manner of etcd raft's datadriven tests. A file is a
// list of directives, each one or more command lines, a line "----" and
// the expected output, ended by a blank line; lines starting with # before
// a directive are comments. The commands:
//
//	new ranks=N [cache=C] [fusion=F] [early=B] [warn=D] [shutdown=D] [timeout=D]
//	                  a fresh job of N negotiators; early: the largest
//	                  control vector with an early all-reduce (0: none)
//	submit ranks=R,.. name=X [kind=allreduce] [dtype=f32] [shape=4] [op=sum]
//	       [prescale=P] [postscale=P] [root=R] [group=G/S]
//	                  each rank in ranks submits X; element i of rank r's
//	                  data is r+1 (a float or an integer of the dtype)
//	join ranks=R,..   those ranks join
//	advance D         the clock moves on by D
//	cycle [stopping=R,..] [silent=R,..]
//	                  one cycle on every rank, the exchange and the gather
//	                  done by the test as the collectives would do them;
//	                  silent ranks take no part, and the others' exchange
//	                  marks them so (collective.AnswerSilent)
//
// A cycle prints what each rank proposes (its control vector in hex, split
// into its sections: header, not joined, not shutting down, payload
// lengths, answers, autotuning, cache bits, early section; then the early
// data apart and the bytes of uncached requests), the agreed vector, and
// what the ranks decide, ranks with the same decisions together.
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in testdata: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runTranscript(t, f) })
	}
}

// directive is one command block of a transcript.
type directive struct {
	lead string   // the comments and blank lines before it, verbatim
	cmds []string // its command lines
	want string   // the expected output
	line int      // the line of its first command
}

// parseTranscript reads a transcript file.
func parseTranscript(path string) ([]directive, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	var (
		ds   []directive
		cur  directive
		lead strings.Builder
		want strings.Builder
		// 0: between directives, 1: in commands, 2: in the output
		state int
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case state == 0 && (line == "" || strings.HasPrefix(line, "#")):
			lead.WriteString(line + "\n")
		case state == 0:
			cur = directive{lead: lead.String(), cmds: []string{line}, line: n}
			lead.Reset()
			state = 1
		case state == 1 && line == "----":
			state = 2
		case state == 1 && line == "":
			return nil, "", fmt.Errorf("%s:%d: a directive without ----", path, n)
		case state == 1:
			cur.cmds = append(cur.cmds, line)
		case state == 2 && line == "":
			cur.want = want.String()
			want.Reset()
			ds = append(ds, cur)
			lead.WriteString("\n")
			state = 0
		default:
			want.WriteString(line + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		return nil, "", err
	}
	switch state {
	case 1:
		return nil, "", fmt.Errorf("%s: the last directive has no ----", path)
	case 2:
		cur.want = want.String()
		ds = append(ds, cur)
	}
	return ds, lead.String(), nil
}

// runTranscript runs one file's directives in order, failing on each
// output that differs (or, with -rewrite, writing the outputs back).
func runTranscript(t *testing.T, path string) {
	ds, tail, err := parseTranscript(path)
	if err != nil {
		t.Fatal(err)
	}
	var job *trJob
	var out strings.Builder
	for _, d := range ds {
		var got strings.Builder
		for _, c := range d.cmds {
			if err := run(&job, c, &got); err != nil {
				t.Fatalf("%s:%d: %s: %v", path, d.line, c, err)
			}
		}
		if !*rewrite && got.String() != d.want {
			t.Errorf("%s:%d: %s\ngot:\n%swant:\n%s", path, d.line, strings.Join(d.cmds, "; "), got.String(), d.want)
		}
		out.WriteString(d.lead + strings.Join(d.cmds, "\n") + "\n----\n" + got.String())
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()+strings.TrimSuffix(tail, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// trJob is a job of negotiators that a transcript drives.
type trJob struct {
	ns      []*negotiator
	now     time.Time
	seq     uint64
	stopped bool // a rank stopped: no more cycles
}

// args are a command's key=value arguments.
type args map[string]string

func parseArgs(fields []string) (args, error) {
	a := args{}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("argument %q is not key=value", f)
		}
		a[k] = v
	}
	return a, nil
}

func (a args) int(key string, def int) (int, error) {
	v, ok := a[key]
	if !ok {
		return def, nil
	}
	return strconv.Atoi(v)
}

func (a args) duration(key string) (time.Duration, error) {
	v, ok := a[key]
	if !ok {
		return 0, nil
	}
	return time.ParseDuration(v)
}

func (a args) float(key string) (float64, error) {
	v, ok := a[key]
	if !ok {
		return 0, nil
	}
	return strconv.ParseFloat(v, 64)
}

// ranks parses key's list of ranks ("0,2").
func (a args) ranks(key string, size int) ([]int, error) {
	var out []int
	v := a[key]
	if v == "" {
		return nil, nil
	}
	for s := range strings.SplitSeq(v, ",") {
		r, err := strconv.Atoi(s)
		if err != nil || r < 0 || r >= size {
			return nil, fmt.Errorf("%s: bad rank %q", key, s)
		}
		out = append(out, r)
	}
	return out, nil
}

// run carries out one command line, writing its output to out.
func run(jp **trJob, line string, out *strings.Builder) error {
	fields := strings.Fields(line)
	a, err := parseArgs(fields[1:])
	if fields[0] == "advance" {
		a, err = nil, nil
	}
	if err != nil {
		return err
	}
	if fields[0] == "new" {
		*jp, err = newJob(a)
		return err
	}
	j := *jp
	if j == nil {
		return fmt.Errorf("no job: start with new")
	}
	switch fields[0] {
	case "submit":
		return j.submit(a)
	case "join":
		rs, err := a.ranks("ranks", len(j.ns))
		for _, r := range rs {
			j.ns[r].join()
		}
		return err
	case "advance":
		if len(fields) != 2 {
			return fmt.Errorf("advance takes a duration")
		}
		d, err := time.ParseDuration(fields[1])
		j.now = j.now.Add(d)
		return err
	case "cycle":
		stopping, err := a.ranks("stopping", len(j.ns))
		if err != nil {
			return err
		}
		silent, err := a.ranks("silent", len(j.ns))
		if err != nil {
			return err
		}
		return j.cycle(stopping, silent, out)
	}
	return fmt.Errorf("unknown command %q", fields[0])
}

func newJob(a args) (*trJob, error) {
	var cfg Config
	size, err := a.int("ranks", 2)
	if err != nil {
		return nil, err
	}
	if cfg.CacheCapacity, err = a.int("cache", 0); err != nil {
		return nil, err
	}
	fusion, err := a.int("fusion", 0)
	if err != nil {
		return nil, err
	}
	cfg.FusionThreshold = int64(fusion)
	early, err := a.int("early", 0)
	if err != nil {
		return nil, err
	}
	for key, d := range map[string]*time.Duration{"warn": &cfg.StallWarning, "shutdown": &cfg.StallShutdown, "timeout": &cfg.OpTimeout} {
		if *d, err = a.duration(key); err != nil {
			return nil, err
		}
	}
	j := &trJob{now: t0}
	for r := range size {
		j.ns = append(j.ns, newNegotiator(r, size, cfg, early))
	}
	return j, nil
}

// submit submits a request on the ranks named, with data of rank+1 each.
func (j *trJob) submit(a args) error {
	req := Request{Name: a["name"], Kind: KindAllreduce, DType: kernels.F32, ReduceOp: kernels.Sum, Shape: []int{4}}
	if k, ok := a["kind"]; ok {
		i := slices.Index(kindNames[:], k)
		if i < 0 {
			return fmt.Errorf("unknown kind %q", k)
		}
		req.Kind = Kind(i)
	}
	var err error
	if d, ok := a["dtype"]; ok {
		if req.DType, err = kernels.ParseDType(d); err != nil {
			return err
		}
	}
	if o, ok := a["op"]; ok {
		if req.ReduceOp, err = kernels.ParseOp(o); err != nil {
			return err
		}
	}
	if s, ok := a["shape"]; ok {
		req.Shape = nil
		for d := range strings.SplitSeq(s, "x") {
			n, err := strconv.Atoi(d)
			if err != nil {
				return fmt.Errorf("shape %q: %v", s, err)
			}
			req.Shape = append(req.Shape, n)
		}
	}
	if req.Root, err = a.int("root", 0); err != nil {
		return err
	}
	if req.Prescale, err = a.float("prescale"); err != nil {
		return err
	}
	if req.Postscale, err = a.float("postscale"); err != nil {
		return err
	}
	if g, ok := a["group"]; ok {
		id, n, _ := strings.Cut(g, "/")
		if req.Group, err = strconv.ParseUint(id, 10, 64); err != nil {
			return err
		}
		if req.GroupSize, err = strconv.Atoi(n); err != nil {
			return err
		}
	}
	rs, err := a.ranks("ranks", len(j.ns))
	if err != nil || len(rs) == 0 {
		return fmt.Errorf("submit needs ranks: %v", err)
	}
	for _, r := range rs {
		j.seq++
		data, err := fill(req.DType, req.Count(), float64(r+1))
		if err != nil {
			return err
		}
		j.ns[r].submit(&entry{req: req, data: data, submitted: j.now, seq: j.seq, slot: -1})
	}
	return nil
}

// fill returns count elements of dtype, each v.
func fill(dt kernels.DType, count int, v float64) ([]byte, error) {
	one := make([]byte, dt.Size())
	switch dt {
	case kernels.F32:
		kernels.FromBytes[float32](one)[0] = float32(v)
	case kernels.F64:
		kernels.FromBytes[float64](one)[0] = v
	case kernels.I32:
		kernels.FromBytes[int32](one)[0] = int32(v)
	case kernels.I64:
		kernels.FromBytes[int64](one)[0] = int64(v)
	default:
		return nil, fmt.Errorf("transcripts fill f32, f64, i32 and i64, not %v", dt)
	}
	out := make([]byte, 0, count*len(one))
	for range count {
		out = append(out, one...)
	}
	return out, nil
}

// values prints a buffer of dtype as numbers.
func values(dt kernels.DType, b []byte) string {
	switch dt {
	case kernels.F32:
		return fmt.Sprint(kernels.FromBytes[float32](b))
	case kernels.F64:
		return fmt.Sprint(kernels.FromBytes[float64](b))
	case kernels.I32:
		return fmt.Sprint(kernels.FromBytes[int32](b))
	case kernels.I64:
		return fmt.Sprint(kernels.FromBytes[int64](b))
	}
	return hex.EncodeToString(b)
}

// cycle runs one cycle on every rank: begin; the Min all-reduce of the
// control vectors with the early data reduced by their own op, as
// Comm.Agree does; exchanged; the all-gather; decide; and inspect where
// the decision asks, as the Engine does.
func (j *trJob) cycle(stopping, silent []int, out *strings.Builder) error {
	if j.stopped {
		return fmt.Errorf("a rank has stopped: start a new job")
	}
	var props []proposal
	var ns []*negotiator
	for r, n := range j.ns {
		if slices.Contains(silent, r) {
			fmt.Fprintf(out, "rank %d is silent\n", r)
			continue
		}
		p, err := n.begin(j.now, slices.Contains(stopping, r))
		if err != nil {
			return fmt.Errorf("rank %d: begin: %v", r, err)
		}
		props, ns = append(props, p), append(ns, n)
		fmt.Fprintf(out, "rank %d proposes %s", r, j.sections(n, p.ctl))
		if p.rider != nil && p.rider.Apart != nil {
			fmt.Fprintf(out, " + %d bytes apart", len(p.rider.Apart))
		}
		fmt.Fprintf(out, "; %d bytes of requests\n", len(p.payload))
	}
	agreed, err := agreeAll(props)
	if err != nil {
		return err
	}
	for _, r := range silent {
		agreed[props[0].answers+r] = collective.AnswerSilent
	}
	fmt.Fprintf(out, "agreed %s\n", j.sections(ns[0], agreed))
	var gathered []byte
	for _, p := range props {
		gathered = append(gathered, p.payload...)
	}
	blocks := make([]string, len(j.ns))
	for r, n := range j.ns {
		if slices.Contains(silent, r) {
			blocks[r] = "silent\n"
			continue
		}
		blocks[r], err = j.follow(n, agreed, gathered)
		if err != nil {
			return fmt.Errorf("rank %d: %v", r, err)
		}
	}
	printBlocks(out, blocks)
	return nil
}

// agreeAll does what Comm.Agree does to the proposals: an element-wise Min of
// the vectors, with the riders reduced by their own function (in the
// vector from At on; apart, in place once the agreed byte at If is 1).
// Every rank answers. It returns the agreed vector; apart data are
// reduced into every rank's own buffer.
func agreeAll(props []proposal) ([]byte, error) {
	v := slices.Clone(props[0].ctl)
	for r, p := range props {
		if len(p.ctl) != len(v) {
			return nil, fmt.Errorf("rank %d: control vector of %d bytes, rank 0's has %d", r, len(p.ctl), len(v))
		}
	}
	var rd collective.AgreeRider
	if props[0].rider != nil {
		rd = *props[0].rider
	}
	tail := len(v)
	if rd.Reduce != nil && rd.Apart == nil {
		tail = rd.At
	}
	for _, p := range props[1:] {
		for i := range tail {
			v[i] = min(v[i], p.ctl[i])
		}
		if tail < len(v) {
			rd.Reduce(v[tail:], p.ctl[tail:])
		}
	}
	if rd.Reduce != nil && rd.Apart != nil && v[rd.If] == 1 { // every rank has a rider then
		sum := slices.Clone(props[0].rider.Apart)
		for _, p := range props[1:] {
			rd.Reduce(sum, p.rider.Apart)
		}
		for _, p := range props {
			copy(p.rider.Apart, sum)
		}
	}
	return v, nil
}

// follow hands rank n the agreed vector and the gathered requests, decides
// and inspects; it returns what n did, one line each.
func (j *trJob) follow(n *negotiator, agreed, gathered []byte) (string, error) {
	var b strings.Builder
	a := n.exchanged(slices.Clone(agreed), j.now)
	if a.note != nil {
		fmt.Fprintf(&b, "log %v %s%s\n", a.note.level, a.note.msg, noteArgs(a.note.args))
	}
	if a.err != nil {
		j.stopped = true
		fmt.Fprintf(&b, "stop (abort %v): %v\n", a.abort, a.err)
		return b.String(), nil
	}
	if t := a.early; t != nil {
		fmt.Fprintf(&b, "early %s from slot %d: %s\n", t.resp.name, t.slot, taskResult(t))
	}
	if a.gather != nil {
		fmt.Fprintf(&b, "gather %v\n", a.gather)
		if err := n.gathered(slices.Clone(gathered), n.start); err != nil {
			return "", err
		}
	}
	d := n.decide(j.now)
	if d.joinDone {
		fmt.Fprintf(&b, "join done, last rank %d\n", d.lastJoined)
	}
	for _, t := range d.tasks {
		from := "negotiated"
		if t.slot >= 0 {
			from = fmt.Sprintf("slot %d", t.slot)
		}
		mine := ""
		if t.en == nil {
			mine = ", not submitted here"
		}
		fmt.Fprintf(&b, "decided %s (%s%s)", t.resp.name, from, mine)
		if t.err != nil {
			fmt.Fprintf(&b, ": %v", t.err)
		}
		b.WriteString("\n")
	}
	if len(d.plan) > 0 {
		fmt.Fprintf(&b, "plan %s\n", planNames(d))
	}
	var flags []string
	for _, f := range []struct {
		on   bool
		name string
	}{{d.idle, "idle"}, {d.again, "again"}, {d.inspect, "inspect"}} {
		if f.on {
			flags = append(flags, f.name)
		}
	}
	if len(flags) > 0 {
		fmt.Fprintf(&b, "%s\n", strings.Join(flags, ", "))
	}
	if d.inspect {
		if note := n.inspect(j.now); note != nil {
			fmt.Fprintf(&b, "log %v %s%s\n", note.level, note.msg, noteArgs(note.args))
		}
	}
	return b.String(), nil
}

// taskResult prints a completed task's output, or its error.
func taskResult(t *task) string {
	if t.err != nil {
		return "error: " + t.err.Error()
	}
	return values(t.resp.req.DType, t.out)
}

// sections prints a control vector of n's job in hex, a space between its
// sections (see controlVector): header, not joined, not shutting down,
// payload lengths, answers, autotuning, cache bits, the early section.
func (j *trJob) sections(n *negotiator, v []byte) string {
	size := len(j.ns)
	bounds := []int{4, size, size, 4 * size, size, n.tuneSection(), n.cache.span()}
	var parts []string
	at := 0
	for _, w := range bounds {
		if w > 0 && at+w <= len(v) {
			parts = append(parts, hex.EncodeToString(v[at:at+w]))
		}
		at += w
	}
	if at < len(v) {
		parts = append(parts, "| "+hex.EncodeToString(v[at:]))
	}
	return strings.Join(parts, " ")
}

// printBlocks prints each rank's lines, ranks with the same lines together.
func printBlocks(out *strings.Builder, blocks []string) {
	done := make([]bool, len(blocks))
	for r, blk := range blocks {
		if done[r] {
			continue
		}
		same := []string{strconv.Itoa(r)}
		for o := r + 1; o < len(blocks); o++ {
			if !done[o] && blocks[o] == blk {
				done[o] = true
				same = append(same, strconv.Itoa(o))
			}
		}
		fmt.Fprintf(out, "rank %s:\n", strings.Join(same, " "))
		if blk == "" {
			blk = "nothing\n"
		}
		for l := range strings.Lines(blk) {
			out.WriteString("  " + l)
		}
	}
}

// noteArgs prints a log note's attributes but the hint, " key=value" each.
func noteArgs(kv []any) string {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] != "hint" {
			fmt.Fprintf(&b, " %v=%v", kv[i], kv[i+1])
		}
	}
	return b.String()
}
