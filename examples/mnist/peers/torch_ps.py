#!/usr/bin/python3
"""torch_ps: PyTorch's parameter-server pattern as the peer of gorovod's PS mode.

The model and the optimizer are examples/mnist's defaults: the "mlp"
784-256-128-10 with ReLU, softmax cross-entropy, float64, He-initialised
weights (normal, std sqrt(2/fan_in); biases zero), SGD with momentum 0.9 and
weight decay 5e-5 (g = grad + wd*w; buf = mu*buf + g; w -= lr*buf, on every
parameter), batch 32 per worker, Fashion-MNIST read from the IDX files.

It is trained the way PyTorch's tutorials "Implementing a Parameter Server
Using Distributed RPC Framework" and "Implementing Batch RPC Processing Using
Asynchronous Executions" do it, over torch.distributed.rpc (TensorPipe):

  rank 0            chief   the coordinator (as gorovod's chief): places the
                            parameters, creates one ParamServer object on each
                            server (rpc.remote -> RRef), starts every worker's
                            loop by RPC, joins them, evaluates and prints;
  ranks 1..W        workerI each step pulls the current parameters from every
                            server at once (rpc_async to each, then wait),
                            computes the gradient locally and pushes it to
                            every server at once;
  ranks W+1..W+P    psI     holds its row shards with their momentum buffers
                            and applies each push under its lock as it comes
                            (asynchronous SGD: no step waits for another
                            worker).

The rank order (chief, workers, servers) is gorovod's PS job's. Every
variable is split into row shards and the shards are placed as gorovod's
ps.MinSizePartitioner and ps.Place do it: ceil(bytes/--min-shard-kib) shards,
at most one per server, largest shard first to the server holding the fewest
bytes. With the default 256 KiB and 2 servers fc1.w (1.6 MB) is split in two
halves and the servers hold 1.06 and 0.82 MB (by layer, 1.61 and 0.28 MB);
--min-shard-kib 0 places whole variables (by layer).

One command starts the whole job (torch.multiprocessing, one process per
rank, on this host) and every process leaves through rpc.shutdown():

    python3 examples/mnist/peers/torch_ps.py --ps 2 --workers 2 --epochs 1 --batch 32

At the end the chief prints one line (test_accuracy is a fraction):

    torch_ps: samples/s=<float> steps=<int> workers=<int> ps=<int> \
roundtrip_ms_median=<float> roundtrip_ms_p99=<float> test_accuracy=<float>

samples/s counts the training samples of all workers over the wall time of
the training phase (the chief starting the workers' loops until the last
returns; loading the data and connecting are before it), as examples/mnist
counts all ranks' samples over an epoch's time. steps counts every worker's
steps. A round trip is one step's pull wall time plus its push wall time
(the gradient computation between them is not in it); median and p99
(nearest rank) are over every step of every worker.

Each process runs torch with one thread (torch.set_num_threads(1),
set_num_interop_threads(1)): the machine this was written on has 2 cores and
a job has 1 + W + P processes (5 by default); the default of one thread per
core in every process would oversubscribe the cores several times over and
measure the scheduler's thrashing rather than the parameter server.

The learning rate is constant (--lr, 0.01, examples/mnist's rate for one
rank): an asynchronous server applies each worker's gradient on its own, so
examples/mnist's warm-up to lr x np and its decay at epochs 3 and 4 are left
out. The weights are drawn with torch's generator, not Go's PCG, so the
initial values (not their distribution) differ from the Go example's.

Without the dataset in --data (apt-get install dataset-fashion-mnist), or
with --synthetic, it trains, like examples/mnist, on a SYNTHETIC set of ten
classes of three bright blobs each (gain 0.6-1.4, pixel noise 0.35;
--synthetic-train and --synthetic-test images, 12000 and 2000), and says so.
The synthetic images are made with torch's generator and are not the same
images as the Go example's.

It needs torch (Debian: apt-get install python3-torch). Run by a python3
without torch (a pyenv shim, say), it starts itself again with
/usr/bin/python3 when that one has it.
"""
import argparse
import ctypes
import gzip
import math
import os
import signal
import socket
import statistics
import struct
import sys
import threading
import time

# The RPC agents' glog INFO lines ("RPC agent for ps0 is shutting down") are
# noise here; glog reads this when torch's libraries load.
os.environ.setdefault("GLOG_minloglevel", "1")

try:
    import torch
except ImportError:
    _SYS = "/usr/bin/python3"
    if os.path.exists(_SYS) and os.path.realpath(sys.executable) != os.path.realpath(_SYS):
        os.execv(_SYS, [_SYS] + sys.argv)
    sys.exit("torch_ps: needs torch (Debian: apt-get install python3-torch)")

import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn.functional as F

SIDE, CLASSES, PIXELS = 28, 10, 28 * 28
DTYPE = torch.float64


# ----------------------------------------------------------------- data

def read_idx(path):
    """Reads an unsigned-byte IDX file (path, or path.gz when path is absent)
    and returns its dimensions and its bytes as a uint8 tensor."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08 or raw[3] == 0:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    nd = raw[3]
    dims = list(struct.unpack(f">{nd}I", raw[4:4 + 4 * nd]))
    n = math.prod(dims)
    data = raw[4 + 4 * nd:]
    if len(data) != n:
        raise ValueError(f"{path}: {dims} needs {n} bytes of data, has {len(data)}")
    return dims, torch.frombuffer(bytearray(data), dtype=torch.uint8)


def load_split(data_dir, split):
    """Images (n x 784, uint8) and labels (n, int64) of one split."""
    idims, pix = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte"))
    ldims, labels = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte"))
    if len(idims) != 3 or idims[1:] != [SIDE, SIDE] or ldims != idims[:1]:
        raise ValueError(f"{split}: images {idims} and labels {ldims} do not match")
    labels = labels.long()
    if labels.numel() and int(labels.max()) >= CLASSES:
        raise ValueError(f"{split}: label {int(labels.max())} out of range")
    return pix.view(-1, PIXELS), labels


def synthetic(n_train, n_test, seed):
    """examples/mnist's synthetic set: each class is three random bright
    disks; an image is its class's pattern at a random gain plus noise.
    Every process makes the same set from seed. Pixels are quantised to
    bytes, as the real set's are."""
    g = torch.Generator().manual_seed(seed ^ 0x5EED)
    yy, xx = torch.meshgrid(torch.arange(SIDE, dtype=DTYPE), torch.arange(SIDE, dtype=DTYPE), indexing="ij")
    protos = torch.zeros(CLASSES, PIXELS, dtype=DTYPE)
    for c in range(CLASSES):
        for _ in range(3):
            cy, cx, r = (torch.rand(3, generator=g, dtype=DTYPE) * torch.tensor([SIDE, SIDE, 4.0], dtype=DTYPE)).tolist()
            r += 2
            protos[c][((yy - cy) ** 2 + (xx - cx) ** 2 < r * r).flatten()] = 1

    def make(n):
        labels = torch.randint(CLASSES, (n,), generator=g)
        gain = 0.6 + 0.8 * torch.rand(n, 1, generator=g, dtype=DTYPE)
        x = gain * protos[labels] + 0.35 * torch.randn(n, PIXELS, generator=g, dtype=DTYPE)
        return (x.clamp(0, 1) * 255).round().to(torch.uint8), labels

    return make(n_train), make(n_test)


def load_data(cfg, split):
    """One split ("train" or "t10k") and a note saying where it came from.
    Like examples/mnist it falls back to the synthetic set only when the
    files are missing; a damaged file is an error."""
    if not cfg.synthetic:
        try:
            x, y = load_split(cfg.data, split)
            return x, y, f"Fashion-MNIST from {cfg.data}"
        except FileNotFoundError:
            pass
    tr, te = synthetic(cfg.synthetic_train, cfg.synthetic_test, cfg.seed)
    x, y = tr if split == "train" else te
    why = "--synthetic" if cfg.synthetic else f"Fashion-MNIST is not in {cfg.data} (apt-get install dataset-fashion-mnist)"
    return x, y, f"{why}: using a SYNTHETIC set of {cfg.synthetic_train} training and {cfg.synthetic_test} test images"


# ----------------------------------------------------------------- model

def variables(hidden):
    """The mlp's variables in examples/mnist's order: (name, shape, He std
    or 0 for a bias). Weights are in x out, as the Go example's W, so that
    rows (the first dimension) are what a partitioner splits."""
    h2 = max(hidden // 2, 1)
    out = []
    for name, fin, fout in (("fc1", PIXELS, hidden), ("fc2", hidden, h2), ("fc3", h2, CLASSES)):
        out.append((name + ".w", (fin, fout), math.sqrt(2.0 / fin)))
        out.append((name + ".b", (fout,), 0.0))
    return out


def init_values(hidden, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g, dtype=DTYPE) * std if std else torch.zeros(shape, dtype=DTYPE)
            for _, shape, std in variables(hidden)]


def forward(params, x):
    w1, b1, w2, b2, w3, b3 = params
    h = torch.relu(torch.addmm(b1, x, w1))
    h = torch.relu(torch.addmm(b2, h, w2))
    return torch.addmm(b3, h, w3)


def place(hidden, servers, min_shard_bytes):
    """Row shards of every variable and their servers, as gorovod's
    ps.Place(vars, servers, ps.MinSizePartitioner(min, servers)):
    [(var, start, end, server)], in (variable, row) order. min_shard_bytes 0
    keeps every variable whole."""
    shards = []
    for v, (_, shape, _) in enumerate(variables(hidden)):
        rows, nbytes = shape[0], math.prod(shape) * 8
        n = 1 if min_shard_bytes <= 0 else min(max(-(-nbytes // min_shard_bytes), 1), servers, rows)
        base, extra, start = rows // n, rows % n, 0
        for k in range(n):
            end = start + base + (1 if k < extra else 0)
            shards.append([v, start, end, nbytes // rows * (end - start)])
            start = end
    load = [0] * servers
    placed = [None] * len(shards)
    for i in sorted(range(len(shards)), key=lambda i: -shards[i][3]):  # stable: ties in order
        best = min(range(servers), key=lambda s: (load[s], s))
        load[best] += shards[i][3]
        placed[i] = tuple(shards[i][:3]) + (best,)
    return placed, load


# ------------------------------------------------------- parameter server

class ParamServer:
    """One server's row shards, their momentum buffers and its lock. Created
    on the server by the chief through rpc.remote; workers call it through
    the RRef. Pull hands out a copy taken under the lock, so a worker never
    sees half of an update; push applies SGD with momentum and weight decay
    to every shard under the lock, and counts the updates."""

    def __init__(self, values, lr, momentum, wd):
        self.values = values
        self.bufs = [torch.zeros_like(v) for v in values]
        self.lr, self.mu, self.wd = lr, momentum, wd
        self.lock = threading.Lock()
        self.updates = 0

    def pull(self):
        with self.lock:
            return [v.clone() for v in self.values]

    def push(self, grads):
        with self.lock:
            for w, buf, g in zip(self.values, self.bufs, grads):
                g = g.add(w, alpha=self.wd)
                buf.mul_(self.mu).add_(g)
                w.sub_(buf, alpha=self.lr)
            self.updates += 1
            return self.updates


# ----------------------------------------------------------------- worker

_worker = {}  # this worker process's state between the chief's two calls


def worker_prepare(index, workers, ps_rrefs, placement, cfg):
    """Runs on worker index: loads the training set, keeps its layout, and
    pulls once from every server (so that the connections are up before the
    timed phase). Returns the steps one epoch has on every worker."""
    x, y, note = load_data(cfg, "train")
    per_worker = x.shape[0] // workers
    spe = per_worker // cfg.batch
    if spe == 0:
        raise ValueError(f"{x.shape[0]} training images are too few for {workers} workers x batch {cfg.batch}")
    by_server = [[(v, s, e) for v, s, e, srv in placement if srv == i] for i in range(len(ps_rrefs))]
    _worker.update(index=index, workers=workers, rrefs=ps_rrefs, by_server=by_server, x=x, y=y,
                   shapes=[shape for _, shape, _ in variables(cfg.hidden)], cfg=cfg, spe=spe, per=per_worker)
    pull(_worker)
    return spe, note


def pull(st):
    """The current parameters, assembled from every server's shards; the
    servers are asked at once and answer concurrently."""
    futs = [r.rpc_async().pull() for r in st["rrefs"]]
    params = [torch.empty(shape, dtype=DTYPE) for shape in st["shapes"]]
    for layout, fut in zip(st["by_server"], futs):
        for (v, s, e), val in zip(layout, fut.wait()):
            params[v][s:e] = val
    return params


def push(st, grads):
    """Sends every server the gradient rows of its shards, to all at once.
    A shard that is part of a variable is copied first: RPC would otherwise
    send the whole variable's storage behind the view."""
    futs = []
    for r, layout in zip(st["rrefs"], st["by_server"]):
        part = [grads[v] if e - s == grads[v].shape[0] else grads[v][s:e].clone() for v, s, e in layout]
        futs.append(r.rpc_async().push(part))
    torch.futures.wait_all(futs)


def worker_train(steps):
    """Runs on a worker: up to steps steps (0: every epoch of cfg), each one
    pull, forward, backward, push. Every epoch the training set is permuted
    the same way on every worker (seeded by epoch) and worker i takes the
    i-th contiguous share of it, as hvd.ShuffledShard does. Returns the
    steps done, the samples, the round trips (ms) and the mean loss."""
    st = _worker
    cfg, i = st["cfg"], st["index"]
    roundtrips, losses, done = [], [], 0
    total = steps if steps > 0 else cfg.epochs * st["spe"]
    while done < total:
        epoch, s = divmod(done, st["spe"])
        if s == 0:
            perm = torch.randperm(st["x"].shape[0], generator=torch.Generator().manual_seed(cfg.seed * 1000 + epoch))
            share = perm[i * st["per"]:(i + 1) * st["per"]]
        idx = share[s * cfg.batch:(s + 1) * cfg.batch]
        x = st["x"][idx].to(DTYPE).div_(255)
        y = st["y"][idx]
        t0 = time.perf_counter()
        params = pull(st)
        t1 = time.perf_counter()
        for p in params:
            p.requires_grad_(True)
        loss = F.cross_entropy(forward(params, x), y)
        loss.backward()
        t2 = time.perf_counter()
        push(st, [p.grad for p in params])
        t3 = time.perf_counter()
        roundtrips.append(1000 * ((t1 - t0) + (t3 - t2)))
        losses.append(loss.item())
        done += 1
    return done, done * cfg.batch, roundtrips, sum(losses) / max(len(losses), 1)


# ------------------------------------------------------------------ chief

def accuracy(params, x, y):
    correct = 0
    with torch.no_grad():
        for lo in range(0, x.shape[0], 500):
            logits = forward(params, x[lo:lo + 500].to(DTYPE).div_(255))
            correct += int((logits.argmax(1) == y[lo:lo + 500]).sum())
    return correct / max(x.shape[0], 1)


def nearest_rank(sorted_vals, q):
    return sorted_vals[max(math.ceil(q * len(sorted_vals)) - 1, 0)]


def run_chief(cfg):
    say = lambda msg: print(f"torch_ps chief: {msg}", flush=True)
    W, P = cfg.workers, cfg.ps
    placement, load = place(cfg.hidden, P, cfg.min_shard_kib * 1024)
    values = init_values(cfg.hidden, cfg.seed)
    names = [n for n, _, _ in variables(cfg.hidden)]
    ps_rrefs = []
    for srv in range(P):
        mine = [values[v][s:e].clone() for v, s, e, where in placement if where == srv]
        ps_rrefs.append(rpc.remote(f"ps{srv}", ParamServer, args=(mine, cfg.lr, cfg.momentum, cfg.wd)))
    layout = ", ".join(f"ps{srv}: " + " ".join(f"{names[v]}[{s}:{e}]" for v, s, e, where in placement if where == srv)
                       for srv in range(P))
    say(f"mlp, {sum(v.numel() for v in values)} float64 parameters on {P} server(s) ({layout}; bytes {load})")

    futs = [rpc.rpc_async(f"worker{i}", worker_prepare, args=(i, W, ps_rrefs, placement, cfg), timeout=0)
            for i in range(W)]
    spe, note = [f.wait() for f in futs][0]
    say(note)
    per = [cfg.epochs * spe] * W  # --max-steps bounds the run, never lengthens it
    if cfg.max_steps > 0:
        per = [min(n, cfg.max_steps // W + (1 if i < cfg.max_steps % W else 0)) for i, n in enumerate(per)]
    say(f"{W} worker(s) x batch {cfg.batch}, {spe} steps per epoch per worker, {sum(per)} steps in all, "
        f"lr {cfg.lr} momentum {cfg.momentum} wd {cfg.wd}, asynchronous")

    start = time.perf_counter()
    futs = [rpc.rpc_async(f"worker{i}", worker_train, args=(per[i],), timeout=0) for i in range(W)]
    results = [f.wait() for f in futs]
    secs = time.perf_counter() - start

    steps = sum(r[0] for r in results)
    samples = sum(r[1] for r in results)
    rts = sorted(t for r in results for t in r[2])
    loss = sum(r[3] * r[0] for r in results) / max(steps, 1)
    futs = [r.rpc_async().pull() for r in ps_rrefs]
    final = [torch.empty(v.shape, dtype=DTYPE) for v in values]
    got = [f.wait() for f in futs]
    for srv in range(P):
        for (v, s, e, _), val in zip([p for p in placement if p[3] == srv], got[srv]):
            final[v][s:e] = val
    tx, ty, tnote = load_data(cfg, "t10k")
    acc = accuracy(final, tx, ty)
    say(f"trained {steps} steps ({samples} samples) in {secs:.1f} s, mean training loss {loss:.4f}, "
        f"test accuracy {100 * acc:.2f}% on {tx.shape[0]} test images")
    median = statistics.median(rts) if rts else 0.0
    p99 = nearest_rank(rts, 0.99) if rts else 0.0
    print(f"torch_ps: samples/s={samples / secs:.1f} steps={steps} workers={W} ps={P} "
          f"roundtrip_ms_median={median:.3f} roundtrip_ms_p99={p99:.3f} test_accuracy={acc:.4f}", flush=True)


# ------------------------------------------------------------- processes

def role(rank, cfg):
    if rank == 0:
        return "chief"
    if rank <= cfg.workers:
        return f"worker{rank - 1}"
    return f"ps{rank - 1 - cfg.workers}"


def die_with(parent):
    """Has Linux kill this process when the launching process ends (even by
    SIGKILL, when spawn cannot end its children itself), so that no rank is
    left waiting on its peers."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return  # not Linux: spawn's own clean-up is all there is
    if os.getppid() != parent:
        os._exit(1)  # it ended before prctl took effect


def run_rank(rank, cfg, port, parent):
    """One process of the job: every rank joins the RPC group; the chief
    drives the job, the others serve RPCs until the graceful rpc.shutdown()
    that every rank makes has seen all of them done."""
    die_with(parent)
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    opts = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{port}",
                                           num_worker_threads=max(4, 2 * cfg.workers + 2),
                                           rpc_timeout=cfg.rpc_timeout)
    rpc.init_rpc(role(rank, cfg), rank=rank, world_size=1 + cfg.workers + cfg.ps, rpc_backend_options=opts)
    if rank == 0:
        run_chief(cfg)
    rpc.shutdown()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--ps", type=int, default=2, help="parameter servers")
    ap.add_argument("--workers", type=int, default=2, help="workers")
    ap.add_argument("--epochs", type=int, default=1, help="passes over the training set (each worker its share)")
    ap.add_argument("--batch", type=int, default=32, help="batch size per worker step")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps in all, split evenly over the workers (0: every epoch)")
    ap.add_argument("--hidden", type=int, default=256, help="width of the first hidden layer (the second is half)")
    ap.add_argument("--lr", type=float, default=0.01, help="learning rate (constant)")
    ap.add_argument("--momentum", type=float, default=0.9, help="SGD momentum")
    ap.add_argument("--wd", type=float, default=5e-5, help="weight decay")
    ap.add_argument("--seed", type=int, default=42, help="seed of the initial weights and the data order")
    ap.add_argument("--min-shard-kib", type=int, default=256, help="ps.MinSizePartitioner's minimum shard size (0: whole variables)")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist", help="directory of the Fashion-MNIST IDX files (.gz or not)")
    ap.add_argument("--synthetic", action="store_true", help="train on the synthetic set even when --data has Fashion-MNIST")
    ap.add_argument("--synthetic-train", type=int, default=12000, help="training images of the synthetic set")
    ap.add_argument("--synthetic-test", type=int, default=2000, help="test images of the synthetic set")
    ap.add_argument("--rpc-timeout", type=float, default=120, help="seconds one pull or push may take")
    cfg = ap.parse_args()
    if cfg.ps < 1 or cfg.workers < 1 or cfg.batch < 1 or cfg.epochs < 1 or cfg.max_steps < 0 or cfg.hidden < 1:
        ap.error("--ps, --workers, --batch, --epochs and --hidden must be positive, --max-steps not negative")
    start = time.perf_counter()
    # One process per rank; if one fails, spawn ends the others and raises.
    mp.spawn(run_rank, args=(cfg, free_port(), os.getpid()), nprocs=1 + cfg.workers + cfg.ps, join=True)
    print(f"torch_ps: job done in {time.perf_counter() - start:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
