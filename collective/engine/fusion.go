package engine

import "github.com/gorovod/gorovod/kernels"

// soloBytes is the size from which an all-reduce outside a group is
// reduced on its own instead of fused with others. (Fused batches were
// packed into a fusion buffer when this was measured; they are now
// reduced where they lie, see Engine.allreduce, so the two copies below
// are gone and the threshold may deserve a new measurement.)
// Fusion pays for small tensors, whose ring time is mostly per-operation
// latency; a tensor this large spends most of its time moving bytes, so
// packing saves little but costs two copies of it on the processors that
// also drive the network. Measured with examples/synthetic_benchmark
// (ResNet-50's 161 gradients, 102 MB of float32 per step, 200 ms of
// simulated compute) on 4 ranks of the 2-CPU test VM: scaling efficiency
// 73.7-75.1% packing everything up to the threshold, 81.0-90.7% with this
// rule at 1 MiB (10 runs, 256 KiB segments); runs interleaved four times
// (1 MiB segments) gave 81.9-91.3% at 512 KiB,
// 84.1-90.6% at 1 MiB and 80.4-93.5% at 2 MiB (the machine's noise is
// larger than the differences between them).
const soloBytes = 1 << 20

// fusionClass is what all-reduces must share to be fused: the fused
// buffer is reduced with one dtype, one op and one pair of scale factors.
type fusionClass struct {
	dtype     kernels.DType
	op        kernels.Op
	pre, post float64
}

// planItem is one response as the fusion planner sees it.
type planItem struct {
	fusable bool // an all-reduce that did not fail negotiation
	class   fusionClass
	bytes   int64
	group   uint64 // group id, 0 if none (only all-reduces fuse)
}

// planBatches groups items (in response order) into batches, each a list
// of item indexes executed as one operation, in the order of their first
// items. Fusable items of one class are packed into batches of at most
// threshold bytes (an item or group larger than that gets a batch of its
// own, and so does an item of soloBytes or more outside a group); the
// members of a group that share a class are never split. Other items, and
// every item when threshold <= 0, form batches of one. A batch
// takes items until the next one of its class does not fit. The
// plan depends only on its inputs, so every rank makes the same one.
func planBatches(items []planItem, threshold int64) [][]int {
	var out [][]int
	open := map[fusionClass]int{} // class -> index in out of its open batch
	size := map[int]int64{}       // batch index -> bytes
	for _, u := range fusionUnits(items, threshold) {
		it := items[u[0]]
		if !it.fusable || threshold <= 0 || (it.group == 0 && it.bytes >= soloBytes) {
			out = append(out, u)
			continue
		}
		var n int64
		for _, i := range u {
			n += items[i].bytes
		}
		if b, ok := open[it.class]; ok && size[b]+n <= threshold {
			out[b] = append(out[b], u...)
			size[b] += n
			continue
		}
		if n > threshold { // alone, leaving the open batch open
			out = append(out, u)
			continue
		}
		open[it.class], size[len(out)] = len(out), n
		out = append(out, u)
	}
	return out
}

// fusionUnits splits items into the units the planner places whole: the
// members of one group and class together, every other item alone.
func fusionUnits(items []planItem, threshold int64) [][]int {
	type key struct {
		group uint64
		class fusionClass
	}
	var units [][]int
	at := map[key]int{}
	for i, it := range items {
		if it.group == 0 || !it.fusable || threshold <= 0 {
			units = append(units, []int{i})
			continue
		}
		k := key{it.group, it.class}
		if u, ok := at[k]; ok {
			units[u] = append(units[u], i)
			continue
		}
		at[k] = len(units)
		units = append(units, []int{i})
	}
	return units
}

// planTasks plans a cycle's tasks (in response order) into the batches
// the Engine runs, in order, each a list of indexes into tasks: see
// planBatches.
func planTasks(tasks []*task, threshold int64) [][]int {
	if len(tasks) == 0 {
		return nil
	}
	items := make([]planItem, len(tasks))
	for i, t := range tasks {
		items[i] = t.planItem()
	}
	return planBatches(items, threshold)
}

// planItem is how the planner sees the task.
func (t *task) planItem() planItem {
	r := &t.resp.req
	return planItem{
		fusable: t.err == nil && r.Kind == KindAllreduce,
		class:   fusionClass{dtype: r.DType, op: r.ReduceOp, pre: r.Prescale, post: r.Postscale},
		bytes:   int64(r.Bytes()),
		group:   r.Group,
	}
}
