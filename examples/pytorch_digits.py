#!/usr/bin/env python3
"""Trains a small network on scikit-learn's digits data set (8x8 images of
handwritten digits) across ranks with hvdtune.torch: each rank trains on its
shard of the training set, gradients are averaged by DistributedOptimizer,
and the test accuracy is reduced over the ranks' test shards.

    tools/mpirun.sh -np 2 /usr/bin/python3 examples/pytorch_digits.py
"""

import argparse
import sys

import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import hvdtune.torch as hvd


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=32,
                   help="samples per rank per step")
    p.add_argument("--lr", type=float, default=0.05,
                   help="learning rate of one rank (scaled by the ranks)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1 or args.lr <= 0:
        p.error("--epochs and --batch-size must be >= 1 and --lr > 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    hvd.init()
    torch.manual_seed(args.seed)
    digits = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(
        digits.data / 16.0, digits.target, test_size=0.25,
        random_state=args.seed, stratify=digits.target)
    # Every rank sees the same split; each takes every size()-th sample.
    shard = slice(hvd.rank(), None, hvd.size())
    x_train = torch.tensor(x_train[shard], dtype=torch.float32)
    y_train = torch.tensor(y_train[shard])
    x_test = torch.tensor(x_test[shard], dtype=torch.float32)
    y_test = torch.tensor(y_test[shard])

    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(),
                                momentum=0.9)
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    # Ranks step in lockstep: every rank runs the same number of batches.
    steps = int(hvd.allreduce(torch.tensor([len(x_train)]), op=hvd.Min,
                              name="digits.min_len")[0]) // args.batch_size
    g = torch.Generator().manual_seed(args.seed + hvd.rank())
    for epoch in range(args.epochs):
        order = torch.randperm(len(x_train), generator=g)
        total = 0.0
        for i in range(steps):
            idx = order[i * args.batch_size:(i + 1) * args.batch_size]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
            loss.backward()
            optimizer.step()
            total += float(loss)
        mean_loss = float(hvd.allreduce(torch.tensor([total / steps]),
                                        name="digits.loss"))
        if hvd.rank() == 0 and (epoch % 10 == 9 or epoch == args.epochs - 1):
            print("epoch %d: train loss %.4f" % (epoch + 1, mean_loss),
                  flush=True)

    with torch.no_grad():
        correct = (model(x_test).argmax(dim=1) == y_test).sum()
    counts = hvd.allreduce(torch.tensor([int(correct), len(y_test)]),
                           op=hvd.Sum, name="digits.accuracy")
    accuracy = float(counts[0]) / float(counts[1])
    if hvd.rank() == 0:
        print("test accuracy: %.4f (%d of %d)" %
              (accuracy, int(counts[0]), int(counts[1])), flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
