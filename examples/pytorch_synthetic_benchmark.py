#!/usr/bin/env python3
"""Synthetic training throughput of a torchvision model on every rank, with
the options of Horovod's PyTorch synthetic benchmark. Run under mpirun:

    tools/mpirun.sh -np 2 /usr/bin/python3 examples/pytorch_synthetic_benchmark.py \\
        --model resnet18 --batch-size 8 --image-size 64

Add HOROVOD_AUTOTUNE=1 (and HOROVOD_AUTOTUNE_LOG=file.csv) to tune the
runtime's knobs while it trains. As Horovod's, it trains on the GPU (one per
local rank) when torch sees one, unless --no-cuda.
"""

import argparse
import json
import sys
import timeit

import numpy as np
import torch
import torch.nn.functional as F
import torchvision.models

import hvdtune.torch as hvd


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="PyTorch synthetic benchmark on hvdtune",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--fp16-allreduce", action="store_true",
                   help="allreduce gradients in float16")
    p.add_argument("--model", default="resnet50",
                   help="any torchvision.models constructor name")
    p.add_argument("--batch-size", type=int, default=32,
                   help="images per rank per batch")
    p.add_argument("--num-warmup-batches", type=int, default=10,
                   help="batches before the timed iterations")
    p.add_argument("--num-batches-per-iter", type=int, default=10,
                   help="batches per timed iteration")
    p.add_argument("--num-iters", type=int, default=10,
                   help="timed iterations")
    p.add_argument("--use-adasum", action="store_true",
                   help="not supported by hvdtune (refused)")
    p.add_argument("--no-cuda", action="store_true",
                   help="train on the CPU even where torch sees a GPU")
    p.add_argument("--image-size", type=int, default=224,
                   help="height and width of the synthetic images")
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--json", action="store_true",
                   help="rank 0 also prints one JSON line with the results")
    args = p.parse_args(argv)
    for flag in ("batch_size", "num_batches_per_iter", "num_iters",
                 "image_size", "num_classes"):
        if getattr(args, flag) < 1:
            p.error("--%s must be at least 1" % flag.replace("_", "-"))
    if args.num_warmup_batches < 0:
        p.error("--num-warmup-batches must be at least 0")
    if args.use_adasum:
        p.error("--use-adasum: hvdtune has no Adasum reduction")
    if not hasattr(torchvision.models, args.model):
        p.error("--model: torchvision has no model %r" % args.model)
    return args


def main(argv=None):
    args = parse_args(argv)
    hvd.init()
    torch.manual_seed(0)
    cuda = not args.no_cuda and torch.cuda.is_available()
    device = torch.device("cpu")
    if cuda:
        torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())
    model = getattr(torchvision.models, args.model)(
        num_classes=args.num_classes).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size())
    compression = (hvd.Compression.fp16
                   if args.fp16_allreduce else hvd.Compression.none)
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters(),
        compression=compression)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    data = torch.randn(args.batch_size, 3, args.image_size,
                       args.image_size).to(device)
    target = torch.randint(0, args.num_classes, (args.batch_size,)).to(device)
    unit = "GPU" if cuda else "CPU"

    def benchmark_step():
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()

    def log(text):
        if hvd.rank() == 0:
            print(text, flush=True)

    log("Model: %s" % args.model)
    log("Batch size: %d" % args.batch_size)
    log("Image size: %d" % args.image_size)
    log("Number of %ss: %d" % (unit, hvd.size()))
    log("Running warmup...")
    timeit.timeit(benchmark_step, number=args.num_warmup_batches)
    log("Running benchmark...")
    rates = []
    for i in range(args.num_iters):
        seconds = timeit.timeit(benchmark_step,
                                number=args.num_batches_per_iter)
        rate = args.batch_size * args.num_batches_per_iter / seconds
        log("Iter #%d: %.1f img/sec per %s" % (i, rate, unit))
        rates.append(rate)
    mean, conf = np.mean(rates), 1.96 * np.std(rates)
    log("Img/sec per %s: %.1f +-%.1f" % (unit, mean, conf))
    log("Total img/sec on %d %s(s): %.1f +-%.1f" %
        (hvd.size(), unit, hvd.size() * mean, hvd.size() * conf))
    # The slowest rank sets the job's pace: report the sum of the ranks'
    # own means as well.
    total = float(hvd.allreduce(torch.tensor([mean], dtype=torch.float64),
                                op=hvd.Sum, name="benchmark.total")[0])
    status = hvd.autotune_status()
    if hvd.rank() == 0 and args.json:
        print(json.dumps({
            "model": args.model, "device": str(device),
            "batch_size": args.batch_size,
            "image_size": args.image_size, "ranks": hvd.size(),
            "img_per_sec_per_rank": mean, "img_per_sec_total": total,
            "autotune_phase": status["phase"],
            "autotune_samples": status["samples"],
            "autotune_best": status["best"]}), flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
