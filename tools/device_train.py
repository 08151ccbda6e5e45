#!/usr/bin/env python3
"""A short training on CUDA tensors (the CPU without a GPU) with
HOROVOD_AUTOTUNE=1, for tools/device_check.sh: a torchvision model whose
gradients are averaged with hvd.grouped_allreduce_ every step, also on one
rank (hvd.DistributedOptimizer, like Horovod's, reduces nothing there), so
that on one GPU the gradients still run on the runtime's NCCL backend while
the tuner explores. Runs until the tuner froze and --after-freeze more
steps passed, or --max-steps; rank 0 prints the throughput before and after
the freeze and the autotune status. Run under mpirun:

    mpirun -np 1 python3 tools/device_train.py --model resnet18
"""

import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F
import torchvision.models

import hvdtune.torch as hvd


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="resnet18",
                   help="any torchvision.models constructor name")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--num-classes", type=int, default=100)
    p.add_argument("--max-steps", type=int, default=600)
    p.add_argument("--after-freeze", type=int, default=20,
                   help="steps timed after the tuner froze")
    p.add_argument("--max-seconds", type=float, default=90,
                   help="stop after this long whatever the tuner's phase")
    args = p.parse_args(argv)
    if not hasattr(torchvision.models, args.model):
        p.error("--model: torchvision has no model %r" % args.model)
    for flag in ("batch_size", "image_size", "num_classes", "max_steps"):
        if getattr(args, flag) < 1:
            p.error("--%s must be at least 1" % flag.replace("_", "-"))
    return args


def main(argv=None):
    args = parse_args(argv)
    hvd.init()
    device = torch.device("cpu")
    if torch.cuda.is_available():
        torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())
    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)(
        num_classes=args.num_classes).to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(args.batch_size, 3, args.image_size,
                       args.image_size, device=device)
    target = torch.randint(0, args.num_classes, (args.batch_size,),
                           device=device)
    params = [p for p in model.parameters() if p.requires_grad]
    start = time.time()
    frozen_at = None
    times = {"before": [], "after": []}
    step = 0
    for step in range(1, args.max_steps + 1):
        t0 = time.time()
        opt.zero_grad()
        F.cross_entropy(model(data), target).backward()
        hvd.grouped_allreduce_([p.grad for p in params], op=hvd.Average,
                               name="grads")
        opt.step()
        if device.type == "cuda":
            torch.cuda.current_stream(device).synchronize()
        hvd.mark_step()
        times["before" if frozen_at is None else "after"].append(
            time.time() - t0)
        # Every rank stops at the same step: rank 0's view, broadcast.
        phase = hvd.autotune_status()["phase"] if hvd.rank() == 0 else ""
        stop = torch.tensor([0 if phase != "frozen" else 1,
                             int(time.time() - start > args.max_seconds)])
        stop = hvd.broadcast(stop, 0, name="device_train.stop")
        if frozen_at is None and int(stop[0]):
            frozen_at = step
        if (frozen_at is not None and step - frozen_at >= args.after_freeze) \
                or int(stop[1]):
            break
    status = hvd.autotune_status()
    if hvd.rank() == 0:

        def rate(ts):
            ts = sorted(ts[len(ts) // 5:]) if ts else []  # past the warm-up
            return args.batch_size / ts[len(ts) // 2] if ts else 0.0

        print("device_train: %s on %s, %d rank(s), %d steps, gradients "
              "allreduced on %s" %
              (args.model, device, hvd.size(), step,
               "NCCL" if device.type == "cuda" and hvd.has_nccl() else
               "host memory"), flush=True)
        print("device_train: median img/s per rank: %.1f before the "
              "freeze, %.1f after (%s)" %
              (rate(times["before"]), rate(times["after"]),
               "frozen at step %d" % frozen_at if frozen_at else
               "never froze"), flush=True)
        print("device_train: autotune " + json.dumps(
            {k: status[k] for k in ("phase", "samples", "default_score",
                                    "best_score", "best")}), flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
