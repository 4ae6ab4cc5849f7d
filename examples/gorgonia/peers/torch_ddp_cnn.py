#!/usr/bin/python3
"""torch_ddp_cnn: examples/gorgonia's CNN in PyTorch DistributedDataParallel.

The peer of examples/gorgonia (run under gorun) for a side-by-side
measurement at the same process counts. The same network, in float32:

    x (B,1,28,28) -> conv 3x3, 8 filters (pad 1, no bias) -> ReLU -> max-pool 2x2
                  -> conv 3x3, 16 filters (pad 1, no bias) -> ReLU -> max-pool 2x2
                  -> dense 784->64 + bias -> ReLU -> dense 64->10 + bias
                  -> log-softmax, cross-entropy (mean over the batch)

He-initialised weights (normal, std sqrt(2/fan_in)), zero biases, Adam (lr
0.002 by default, betas 0.9/0.999, eps 1e-8), --batch the GLOBAL batch split
evenly among the ranks, Fashion-MNIST (pixels / 255) read from the .gz IDX
files. Each epoch every rank takes its strided share (rank, rank+np, ...) of
that epoch's shuffle of the training set, and steps = n / np / (batch/np),
as examples/gorgonia does; DistributedDataParallel (gloo, CPU) averages the
gradients and broadcasts rank 0's initial weights. After training every rank
tests its share of the test set and the counts are summed (all_reduce).

The shuffles and the initial weights come from torch's generator, not Go's
PCG: the order and the starting values (not their distribution) differ from
the Go example's, so the accuracies agree only up to that.

One command starts the whole job, one process per rank on this host
(torch.multiprocessing.spawn); ranks die with the launching process:

    python3 examples/gorgonia/peers/torch_ddp_cnn.py --np 4 --epochs 1

At the end rank 0 prints one machine-readable line:

    torch_ddp_cnn: np=<int> samples/s=<float> test_accuracy=<float>

samples/s counts every rank's training samples (steps x global batch, all
epochs) over the wall time of the training phase on rank 0, from a barrier
after the set-up (loading, connecting, DDP's broadcast) to the last step's
end; the tests come after it. examples/gorgonia times an epoch's steps the
same way.

Every process runs torch with ONE thread (set_num_threads(1),
set_num_interop_threads(1)): gorun runs one Go process per rank and the Go
example's Gorgonia step runs on one core, while torch's default is one intra-op thread per
core in every process; np processes with a thread per core each would
oversubscribe the cores np times over (on a 2-core machine, 8 threads for
np 4) and measure the scheduler's thrashing rather than the training. With
one thread, both sides use one core per rank.

It needs torch (Debian: apt-get install python3-torch) and the dataset
(apt-get install dataset-fashion-mnist). Run by a python3 without torch (a
pyenv shim, say), it starts itself again with /usr/bin/python3.
"""
import argparse
import ctypes
import gzip
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
    sys.exit("torch_ddp_cnn: needs torch (Debian: apt-get install python3-torch)")

import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

SIDE, CLASSES = 28, 10


def read_idx(path):
    """An unsigned-byte IDX file (path, or path.gz when path is absent):
    its dimensions and its bytes as a uint8 tensor."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08 or raw[3] == 0:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    nd = raw[3]
    dims = list(struct.unpack(f">{nd}I", raw[4:4 + 4 * nd]))
    data = raw[4 + 4 * nd:]
    if len(data) != math.prod(dims):
        raise ValueError(f"{path}: {dims} needs {math.prod(dims)} bytes of data, has {len(data)}")
    return dims, torch.frombuffer(bytearray(data), dtype=torch.uint8)


def load_split(data_dir, split, limit):
    """Images (n,1,28,28) float32 in [0,1] and labels (n,) int64 of one
    split, the first limit of them when limit > 0."""
    idims, pix = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte"))
    ldims, labels = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte"))
    if len(idims) != 3 or idims[1:] != [SIDE, SIDE] or ldims != idims[:1]:
        raise ValueError(f"{split}: images {idims} and labels {ldims} do not match")
    x = pix.view(-1, 1, SIDE, SIDE).float().div_(255)
    y = labels.long()
    if limit > 0:
        x, y = x[:limit], y[:limit]
    return x, y


class CNN(nn.Module):
    """examples/gorgonia's network (model.go)."""

    def __init__(self, f1=8, f2=16, hidden=64):
        super().__init__()
        self.conv1 = nn.Conv2d(1, f1, 3, padding=1, bias=False)
        self.conv2 = nn.Conv2d(f1, f2, 3, padding=1, bias=False)
        self.dense1 = nn.Linear(f2 * 7 * 7, hidden)
        self.dense2 = nn.Linear(hidden, CLASSES)
        with torch.no_grad():
            for m in (self.conv1, self.conv2, self.dense1, self.dense2):
                fan_in = m.weight[0].numel()
                m.weight.normal_(0, math.sqrt(2 / fan_in))
                if m.bias is not None:
                    m.bias.zero_()

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        h = F.relu(self.dense1(h.flatten(1)))
        return F.log_softmax(self.dense2(h), dim=1)


def die_with(parent):
    """Ends this rank when the launching process dies (Linux), so that no
    rank is left waiting on its peers."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(1)


def run_rank(rank, cfg, port, parent):
    die_with(parent)
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    size = cfg.np
    per = cfg.batch // size
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size)
    try:
        xtr, ytr = load_split(cfg.data, "train", cfg.train_limit)
        xte, yte = load_split(cfg.data, "t10k", cfg.test_limit)
        n = len(ytr)
        steps = n // size // per
        if steps == 0:
            raise ValueError(f"{n} training images are less than one global batch of {cfg.batch}")
        # Each rank draws its own weights; DDP broadcasts rank 0's.
        torch.manual_seed(cfg.seed * 1000 + rank)
        model = DDP(CNN())
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        if rank == 0:
            print(f"torch_ddp_cnn: Fashion-MNIST from {cfg.data}: {n} training and {len(yte)} test images; "
                  f"{size} ranks, global batch {cfg.batch} ({per} a rank), Adam lr {cfg.lr}", flush=True)

        dist.barrier()
        start = time.perf_counter()
        for epoch in range(cfg.epochs):
            g = torch.Generator().manual_seed(cfg.seed * 1000003 + epoch)
            shard = torch.randperm(n, generator=g)[rank::size]
            loss_sum = 0.0
            model.train()
            for step in range(steps):
                idx = shard[step * per:(step + 1) * per]
                opt.zero_grad(set_to_none=True)
                loss = F.nll_loss(model(xtr[idx]), ytr[idx])
                loss.backward()
                opt.step()
                loss_sum += loss.item()
            if rank == 0:
                print(f"torch_ddp_cnn: epoch {epoch + 1}: rank 0 loss {loss_sum / steps:.4f}", flush=True)
        secs = time.perf_counter() - start

        model.eval()
        right = 0
        tidx = torch.arange(rank, len(yte), size)
        with torch.no_grad():
            for lo in range(0, len(tidx), 500):
                i = tidx[lo:lo + 500]
                right += int((model.module(xte[i]).argmax(1) == yte[i]).sum())
        tot = torch.tensor([right, len(tidx)], dtype=torch.float64)
        dist.all_reduce(tot)
        if rank == 0:
            samples = steps * cfg.batch * cfg.epochs
            print(f"torch_ddp_cnn: {samples} samples in {secs:.2f} s", flush=True)
            print(f"torch_ddp_cnn: np={size} samples/s={samples / secs:.1f} "
                  f"test_accuracy={tot[0].item() / tot[1].item():.4f}", flush=True)
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--np", type=int, default=1, help="ranks (processes) on this host")
    ap.add_argument("--epochs", type=int, default=2, help="epochs")
    ap.add_argument("--batch", type=int, default=64, help="global batch size, split evenly among the ranks")
    ap.add_argument("--lr", type=float, default=0.002, help="Adam's learning rate")
    ap.add_argument("--train-limit", type=int, default=0, help="train on the first N training images only (0: all)")
    ap.add_argument("--test-limit", type=int, default=0, help="test on the first N test images only (0: all)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the initial weights and the shuffles")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist", help="directory of the Fashion-MNIST IDX files (.gz or not)")
    cfg = ap.parse_args()
    if cfg.np < 1 or cfg.epochs < 1 or cfg.batch < 1 or cfg.train_limit < 0 or cfg.test_limit < 0:
        ap.error("--np, --epochs and --batch must be positive, the limits not negative")
    if cfg.batch % cfg.np:
        ap.error(f"the global batch {cfg.batch} does not split evenly among {cfg.np} ranks")
    # One process per rank; if one fails, spawn ends the others and raises.
    mp.spawn(run_rank, args=(cfg, free_port(), os.getpid()), nprocs=cfg.np, join=True)


if __name__ == "__main__":
    main()
