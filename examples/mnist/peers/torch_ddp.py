#!/usr/bin/python3
"""torch_ddp: examples/mnist's all-reduce training in PyTorch DistributedDataParallel.

The peer of examples/mnist under gorun (the README's quick start) for a
side-by-side measurement at the same process counts. It trains the same
model from the same initial weights on the same batches with the same
schedule, and rank 0 prints the Go program's progress and epoch lines in
the Go program's format, so that the two outputs can be read line by line:

    bin/mnist -write-init /tmp/init.bin -epochs 1       # once: weights and data order
    bin/gorun -np 4 bin/mnist -epochs 1
    python3 examples/mnist/peers/torch_ddp.py --np 4 --init /tmp/init.bin --epochs 1

What is the same as examples/mnist (its defaults; the flags have the Go
program's names with two dashes):

  * Model: the "mlp", 784-H-H/2-10 with ReLU, y = x.W + b with W stored
    inputs x outputs (as the Go layers store it, so the products are
    addmm(b, x, W), and the backward pass's x^T.dy and dy.W^T), float64.
    The hidden width H comes from the init file (-hidden, 256).
  * Initial weights: the Go program's, bit for bit. Go draws them from
    math/rand/v2 (PCG, ziggurat normals); rather than re-implement that
    generator this peer reads the values the Go program writes with
    -write-init FILE (see examples/mnist/initfile.go). Biases start at 0.
    DDP's constructor broadcasts rank 0's values, as
    hvd.BroadcastParameters does.
  * Data order: each epoch's permutation of the training set, also from
    the init file (hvd.ShuffledShard's, seeded by -seed and the epoch).
    Rank r of n takes items r, r+n, r+2n, ... of it, keeps the first
    len/n of them, and takes ceil((len/n)/batch) batches of at most --batch
    (hvd.StepsPerEpoch and hvd.Batch).
  * Data: the IDX files in --data (path or path.gz), pixels / 255 in
    float64, the whole set converted once before training (as the Go
    program does).
  * Loss: mean softmax cross-entropy over the rank's batch; DDP averages
    the gradients over the ranks.
  * Optimizer: torch.optim.SGD, momentum 0.9, weight decay 5e-5 on every
    parameter: g = grad + wd.w; buf = mu.buf + g; w -= lr.buf, which is
    hvd.SGD's rule.
  * Learning rate, set before every step at the fractional epoch
    e = epoch + step/steps_per_epoch (hvd.LRSchedule): warm-up from lr to
    lr x n over --warmup epochs, then lr x n, times --gamma at each of
    --milestones.
  * Printed by rank 0: every --log-every steps (0: a tenth of an epoch)
    the loss since the epoch's start averaged over the ranks, the learning
    rate and samples/s; after each epoch its loss averaged over the ranks,
    the accuracy on the whole test set (rank r classifies test items r,
    r+n, ... in batches of 500, the counts are summed) and samples/s; at
    the end the final accuracy. samples/s is every rank's training samples
    of the epoch over rank 0's time from the epoch's first step to its last
    (loading, connecting and the evaluation are outside it).

The printed losses are the Go program's where the arithmetic is: at np 1
and 2 the float64 products go to the same OpenBLAS, and averaging two
gradients is exact either way, but torch's log-softmax, bias-gradient sums
and reduction orders differ from the Go loops in the last bits, and at
np 4 so does the order in which the all-reduces add the four gradients.
On Fashion-MNIST every printed digit (4 of the loss, 2 of the accuracy)
agreed over one epoch at np 1 and two at np 2 and 4; over more epochs the
last digit may part (peers/README.md).

What PyTorch does its own way: DDP (gloo over loopback TCP) all-reduces the
gradients in buckets as autograd produces them; Python and autograd add
their per-step overheads; the metric all-reduces are dist.all_reduce.

Threads: each rank's matrix products get max(1, CPUs / np) OpenBLAS
threads (--threads overrides), the share examples/mnist gives a rank's
OpenBLAS (and hvd.Init its GOMAXPROCS): Debian's torch calls OpenBLAS for
its float64 products, the library the Go program calls too, and reads
OPENBLAS_NUM_THREADS when it starts. On a 2-core machine that is 2 at
np 1 and 1 at np 2 and 4. Torch's own kernels (ReLU, the loss, SGD's
update) run on one thread (--torch-threads, set_num_threads; one inter-op
thread), as the Go program's element loops run on one goroutine: with two
intra-op threads an np 1 epoch ran at 1.6k samples/s instead of 33k on the
2-core development machine while other jobs used it (the cause was not
looked into further).

One command starts the whole job, one process per rank on this host
(torch.multiprocessing.spawn); if a rank fails, the others are ended and
the command exits non-zero.

It needs torch (Debian: apt-get install python3-torch) and the data set
(apt-get install dataset-fashion-mnist, or the IDX files the Go program was
given with -data). Run by a python3 without torch (a pyenv shim, say), it
starts itself again with /usr/bin/python3.
"""
import argparse
import ctypes
import gzip
import json
import math
import os
import signal
import socket
import struct
import sys
import time

try:
    import torch
except ImportError:
    _SYS = "/usr/bin/python3"
    if os.path.exists(_SYS) and os.path.realpath(sys.executable) != os.path.realpath(_SYS):
        os.execv(_SYS, [_SYS] + sys.argv)
    sys.exit("torch_ddp: needs torch (Debian: apt-get install python3-torch)")

import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

SIDE, CLASSES, PIXELS = 28, 10, 28 * 28
INIT_MAGIC = b"gorovod-mnist-init 1\n"


def parse_args(argv):
    p = argparse.ArgumentParser(description="examples/mnist's training in PyTorch DDP (gloo, CPU)")
    p.add_argument("--np", type=int, default=1, help="ranks (processes) on this host")
    p.add_argument("--init", required=True,
                   help="file written by the Go program's -write-init: initial weights and data order")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist", help="directory of the IDX files")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch", type=int, default=32, help="batch size per rank")
    p.add_argument("--lr", type=float, default=0.01, help="one rank's learning rate; the job's is lr x np after warm-up")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--wd", type=float, default=5e-5, help="weight decay")
    p.add_argument("--warmup", type=float, default=1.0, help="epochs of warm-up from lr to lr x np")
    p.add_argument("--milestones", default="3,4", help="epochs at which the rate is multiplied by --gamma")
    p.add_argument("--gamma", type=float, default=0.2)
    p.add_argument("--log-every", type=int, default=0, help="steps between progress lines (0: ten per epoch)")
    p.add_argument("--threads", type=int, default=0, help="OpenBLAS threads per rank (0: CPUs / np)")
    p.add_argument("--torch-threads", type=int, default=1, help="torch's intra-op threads per rank")
    a = p.parse_args(argv)
    a.milestones = [float(m) for m in a.milestones.split(",") if m.strip()]
    if a.np < 1 or a.batch < 1 or a.epochs < 0 or a.torch_threads < 1:
        p.error("--np, --batch and --torch-threads must be at least 1, --epochs at least 0")
    return a


# ------------------------------------------------------------------ inputs

def read_init(path):
    """The -write-init file: its JSON header, the parameters (float64
    tensors in the model's order) and one permutation (int64) per epoch."""
    with open(path, "rb") as f:
        raw = bytearray(f.read())
    if not raw.startswith(INIT_MAGIC):
        raise ValueError(f"{path}: not a file of bin/mnist -write-init")
    end = raw.index(b"\n", len(INIT_MAGIC))
    head = json.loads(raw[len(INIT_MAGIC):end])
    off = end + 1
    params = []
    for p in head["params"]:
        params.append(torch.frombuffer(raw, dtype=torch.float64, count=p["len"], offset=off).clone())
        off += 8 * p["len"]
    n, epochs = head["train_images"], head["epochs"]
    if len(raw) != off + 4 * n * epochs:
        raise ValueError(f"{path}: {len(raw)} bytes, want {off + 4 * n * epochs}")
    # uint32 indices below 2^31 (a training set is far smaller) read as int32
    perms = [torch.frombuffer(raw, dtype=torch.int32, count=n, offset=off + 4 * n * e).long() for e in range(epochs)]
    return head, params, perms


def read_idx(path):
    """An unsigned-byte IDX file (path, or path.gz when path is absent):
    its dimensions and its bytes as a uint8 tensor."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[:3] != b"\0\0\x08" or raw[3] == 0:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = list(struct.unpack(f">{raw[3]}I", raw[4:4 + 4 * raw[3]]))
    body = raw[4 + 4 * raw[3]:]
    if len(body) != math.prod(dims):
        raise ValueError(f"{path}: dimensions {dims} need {math.prod(dims)} bytes, the file has {len(body)}")
    return dims, torch.frombuffer(bytearray(body), dtype=torch.uint8)


def load_split(data, split):
    """Images (n x 784 float64, pixels / 255) and labels (n, int64)."""
    idims, pix = read_idx(os.path.join(data, f"{split}-images-idx3-ubyte"))
    ldims, labels = read_idx(os.path.join(data, f"{split}-labels-idx1-ubyte"))
    if len(idims) != 3 or idims[1:] != [SIDE, SIDE] or ldims != idims[:1]:
        raise ValueError(f"{split}: images {idims} and labels {ldims} do not match")
    return pix.view(-1, PIXELS).to(torch.float64).div_(255), labels.long()


# ------------------------------------------------------------------- model

class MLP(torch.nn.Module):
    """examples/mnist's mlp: dense layers y = x.W + b (W inputs x outputs)
    with ReLU between them, its parameters the init file's values."""

    def __init__(self, head, values):
        super().__init__()
        hidden = head["hidden"]
        dims = [PIXELS, hidden, max(hidden // 2, 1), CLASSES]
        names = [p["name"] for p in head["params"]]
        want = [n for i in range(3) for n in (f"fc{i + 1}.w", f"fc{i + 1}.b")]
        if head["model"] != "mlp" or names != want:
            raise ValueError(f"the init file holds a {head['model']} with {names}; this peer trains the mlp")
        self.ws, self.bs = torch.nn.ParameterList(), torch.nn.ParameterList()
        for i in range(3):
            w, b = values[2 * i], values[2 * i + 1]
            if w.numel() != dims[i] * dims[i + 1] or b.numel() != dims[i + 1]:
                raise ValueError(f"fc{i + 1}: {w.numel()} weights and {b.numel()} biases, want {dims[i]}x{dims[i + 1]}")
            self.ws.append(torch.nn.Parameter(w.view(dims[i], dims[i + 1])))
            self.bs.append(torch.nn.Parameter(b))

    def forward(self, x):
        for i, (w, b) in enumerate(zip(self.ws, self.bs)):
            x = torch.addmm(b, x, w)
            if i < len(self.ws) - 1:
                x = torch.relu(x)
        return x


def lr_at(a, size, e):
    """hvd.LRSchedule{Base: lr, Size: size, WarmupEpochs, Milestones, Gamma}.At(e)."""
    if a.warmup <= 0 or e >= a.warmup:
        lr = a.lr * size
    else:
        lr = a.lr * (1 + (size - 1) * max(e, 0.0) / a.warmup)
    for m in a.milestones:
        if e >= m:
            lr *= a.gamma
    return lr


# -------------------------------------------------------------------- rank

def end_with_launcher(launcher):
    """Has Linux kill this rank when the launching process ends, so that a
    rank never outlives the command waiting on its peers."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != launcher:  # it ended before prctl
        os._exit(1)


def rank_main(rank, a, port, launcher):
    end_with_launcher(launcher)
    size = a.np
    torch.set_num_threads(a.torch_threads)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size)
    say = (lambda s: print(s, flush=True)) if rank == 0 else (lambda s: None)

    head, values, perms = read_init(a.init)
    xtr, ytr = load_split(a.data, "train")
    xte, yte = load_split(a.data, "t10k")
    n = xtr.shape[0]
    if n != head["train_images"]:
        raise ValueError(f"{a.data} has {n} training images, the init file's order is for {head['train_images']}")
    if a.epochs > len(perms):
        raise ValueError(f"the init file holds {len(perms)} epochs' data order; write it with -epochs {a.epochs}")
    say(f"Fashion-MNIST from {a.data}: {n} training and {xte.shape[0]} test images")

    model = MLP(head, values)
    ddp = DDP(model)  # broadcasts rank 0's parameters
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum, weight_decay=a.wd)
    per_rank = n // size
    spe = (per_rank + a.batch - 1) // a.batch
    if spe == 0:
        raise ValueError(f"{n} training images are too few for {size} ranks")
    nparams = sum(p.numel() for p in model.parameters())
    say(f"mlp model, {nparams} parameters, {size} ranks × batch {a.batch}, {spe} steps per epoch, "
        f"on cpu with PyTorch {torch.__version__} DDP (gloo), {a.threads} OpenBLAS and {a.torch_threads} torch thread(s) per rank, "
        f"initial weights and data order from {a.init}")
    log_every = a.log_every if a.log_every > 0 else max(spe // 10, 1)

    def mean_over_ranks(v):
        t = torch.tensor([v], dtype=torch.float64)
        dist.all_reduce(t)
        return t.item() / size

    def accuracy():
        idx = torch.arange(rank, xte.shape[0], size)
        correct = 0
        with torch.no_grad():
            for lo in range(0, idx.numel(), 500):
                part = idx[lo:lo + 500]
                correct += int((model(xte[part]).argmax(1) == yte[part]).sum())
        t = torch.tensor([correct, idx.numel()], dtype=torch.float64)
        dist.all_reduce(t)
        return t[0].item() / max(t[1].item(), 1)

    acc = 0.0
    for epoch in range(a.epochs):
        shard = perms[epoch][rank::size][:per_rank]
        start, samples = time.perf_counter(), 0
        loss_sum = 0.0
        for s in range(spe):
            idx = shard[s * a.batch:(s + 1) * a.batch]
            lr = lr_at(a, size, epoch + s / spe)
            for g in opt.param_groups:
                g["lr"] = lr
            x, y = xtr.index_select(0, idx), ytr.index_select(0, idx)
            opt.zero_grad(set_to_none=False)
            loss = F.cross_entropy(ddp(x), y)
            loss.backward()
            opt.step()
            samples += idx.numel() * size
            loss_sum += loss.item()
            if (s + 1) % log_every == 0 and s + 1 < spe:
                avg = mean_over_ranks(loss_sum / (s + 1))
                say(f"epoch {epoch + 1} [{s + 1:5d}/{spe}] loss {avg:.4f}  lr {lr:.4f}  "
                    f"{samples / (time.perf_counter() - start):6.0f} samples/s")
        secs = time.perf_counter() - start
        avg = mean_over_ranks(loss_sum / spe)
        acc = accuracy()
        say(f"epoch {epoch + 1}: loss {avg:.4f}  test accuracy {100 * acc:.2f}%  {samples / secs:.0f} samples/s ({secs:.1f} s)")
    if a.epochs > 0:
        say(f"final test accuracy {100 * acc:.2f}% after {a.epochs} epochs on {size} rank(s)")
    dist.barrier()
    # Leave without tearing down: in torch 1.13 dropping the DDP module's
    # reducer destroys the gloo process group, whose destructor joins a
    # worker thread that may be waiting for the GIL the joining thread
    # holds; one exit in a few hung that way here.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    a = parse_args(sys.argv[1:])
    if a.threads <= 0:
        a.threads = max(1, len(os.sched_getaffinity(0)) // a.np)
    # Read when each rank's OpenBLAS and OpenMP start, in the spawned processes.
    os.environ["OPENBLAS_NUM_THREADS"] = str(a.threads)
    os.environ["OMP_NUM_THREADS"] = str(a.torch_threads)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(rank_main, args=(a, free_port(), os.getpid()), nprocs=a.np, join=True)


if __name__ == "__main__":
    main()
