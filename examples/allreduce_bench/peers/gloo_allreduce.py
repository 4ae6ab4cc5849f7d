#!/usr/bin/python3
"""gloo_allreduce: Gloo's side of allreduce_bench's comparison.

It measures torch.distributed's all_reduce over Gloo (the TCP ring that
Horovod uses without MPI) the way allreduce_bench measures gorovod and
mpi_allreduce.c measures MPI: float32 sums in place, warm-up calls, then
samples of k back-to-back calls after a barrier, rank 0 deciding for all
whether another follows, the slowest rank's time per sample, the median,
and a last all-reduce of rank+1 checked against n(n+1)/2. Rank 0 prints the
same RESULT lines and "# done".

    gloo_allreduce.py -n 4 -s 4096,1048576            # starts 4 local workers
    gloo_allreduce.py --worker R --port P -n 4 ...     # one worker; they meet at
                                                       # $MASTER_ADDR (127.0.0.1):P
"""
import argparse
import os
import socket
import subprocess
import sys
import time
from datetime import timedelta


def plan(nbytes):
    """Warm-up calls, most samples and calls per sample: allreduce_bench's table."""
    for limit, p in ((16 << 10, (200, 200, 20)), (256 << 10, (50, 100, 5)), (4 << 20, (10, 50, 1)),
                     (32 << 20, (3, 20, 1)), (128 << 20, (2, 10, 1))):
        if nbytes <= limit:
            return p
    return 1, 5, 1


def worker(args):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", init_method=f"tcp://{addr}:{args.port}", rank=args.worker,
                            world_size=args.n, timeout=timedelta(seconds=args.timeout))
    rank, n = args.worker, args.n
    flag = torch.zeros(1, dtype=torch.int32)

    def proceed(more):
        flag[0] = 1 if (rank == 0 and more) else 0
        dist.broadcast(flag, 0)
        return flag[0].item() == 1

    for nbytes in (int(s) for s in args.sizes.split(",")):
        buf = torch.empty(nbytes // 4, dtype=torch.float32)
        warm, iters, k = plan(nbytes)
        start, w = time.perf_counter(), 0
        while proceed(w < warm and (w < 1 or time.perf_counter() - start < args.warm_budget)):
            if w % 10 == 0:
                buf.fill_(rank + 1)  # in-place sums grow n-fold a call
            dist.all_reduce(buf)
            w += 1
        samples, start = [], time.perf_counter()
        while proceed(len(samples) < iters and (len(samples) < 3 or time.perf_counter() - start < args.budget)):
            buf.fill_(rank + 1)
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(k):
                dist.all_reduce(buf)
            samples.append((time.perf_counter() - t0) / k)
        worst = torch.tensor(samples, dtype=torch.float64)
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)  # per sample, the slowest rank counts
        buf.fill_(rank + 1)
        dist.all_reduce(buf)
        wrong = torch.tensor([int((buf != n * (n + 1) / 2).sum().item())], dtype=torch.int64)
        dist.all_reduce(wrong)
        if rank == 0:
            s = sorted(worst.tolist())
            m = len(s)
            med = s[m // 2] if m % 2 else (s[m // 2 - 1] + s[m // 2]) / 2
            algbw = nbytes / med / 1e9
            print(f"RESULT,{args.label},{n},{nbytes},{m},{k},{med:.9f},{s[0]:.9f},{sum(s) / m:.9f},"
                  f"{algbw:.4f},{algbw * 2 * (n - 1) / n:.4f},{'FAIL' if wrong.item() else 'ok'}", flush=True)
    dist.barrier()
    if rank == 0:
        print("# done", flush=True)
    dist.destroy_process_group()


def launch(args):
    """Starts n workers on this host and waits for them; any failure fails all."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, GLOO_SOCKET_IFNAME=os.environ.get("GLOO_SOCKET_IFNAME", "lo"), OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", str(r), "--port", str(port),
                               "-n", str(args.n), "-s", args.sizes, "-b", str(args.budget), "-w", str(args.warm_budget),
                               "-l", args.label, "--timeout", str(args.timeout)], env=env) for r in range(args.n)]
    deadline, status = time.monotonic() + args.timeout, 0
    for p in procs:
        try:
            status = status or p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            status = 124
        if status:
            for q in procs:
                q.kill()
    sys.exit(status)


def main():
    ap = argparse.ArgumentParser(description="Gloo all-reduce benchmark (RESULT lines of allreduce_bench -csv)")
    ap.add_argument("-n", type=int, default=2, help="workers")
    ap.add_argument("-s", "--sizes", default="4096,65536,1048576,16777216", help="bytes per rank, comma separated")
    ap.add_argument("-b", "--budget", type=float, default=1.5, help="seconds of samples per size")
    ap.add_argument("-w", "--warm-budget", type=float, default=0.5, help="seconds of warm-up per size")
    ap.add_argument("-l", "--label", default="gloo")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=300, help="seconds before the job is given up")
    ap.add_argument("--worker", type=int, default=-1, help="run as this worker (rank)")
    args = ap.parse_args()
    if args.worker >= 0:
        worker(args)
    else:
        launch(args)


if __name__ == "__main__":
    main()
