"""A small elastic training job for the elastic tests (test_elastic.py):
`hvd-tune run --host-discovery-script S ... python3 elastic_train.py`.

Every rank trains a small MLP on data that depends only on (step, rank),
commits every --commit-every steps, and prints what the tests read:
  START pid=P host=H rank=R size=N
  FAIL_START / HANG_START t=T host=H  (--fail-on-host / --hang-on-host)
  STEP s rank=R size=N
  RESET t=T size=N world=V last_step=L last_commit=C restored=R
                                        (after each reset, before the sync:
                                         the last step this rank finished,
                                         its last commit, the step its
                                         state went back to)
  FIRST_STEP t=T size=N world=V from_step=S
                                        (first step done in a new world,
                                         starting from step S after the sync:
                                         L - S steps were lost)
  WORLD_CHECK world=V size=N identical=B (every rank, first step of a world:
                                          the parameters agree everywhere)
  DONE rank=R size=N identical=B checksum=C resets=K
  TUNE world=V size=N phase=P samples=S source=X   (rank 0, at each commit,
                                                    with --tune-report)
and exits 3 when the ranks' parameters differ at the end.
"""

import argparse
import os
import sys
import time

import torch

import hvdtune.torch as hvd


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--commit-every", type=int, default=5)
    parser.add_argument("--sleep", type=float, default=0.05)
    parser.add_argument("--tune-report", action="store_true")
    parser.add_argument("--fail-on-host", default=None,
                        help="ranks started on this host exit 1 before "
                        "hvd.init() (a rank lost while its world forms)")
    parser.add_argument("--hang-on-host", default=None,
                        help="ranks started on this host hang before "
                        "hvd.init() without exiting (a rank that never "
                        "reaches its world)")
    args = parser.parse_args()
    if os.environ.get("HOROVOD_HOSTNAME") == args.fail_on_host:
        print("FAIL_START t=%.6f host=%s" % (time.time(), args.fail_on_host),
              flush=True)
        sys.exit(1)
    if os.environ.get("HOROVOD_HOSTNAME") == args.hang_on_host:
        print("HANG_START t=%.6f host=%s pid=%d" %
              (time.time(), args.hang_on_host, os.getpid()), flush=True)
        while True:
            time.sleep(60)

    hvd.init()
    host = os.environ.get("HOROVOD_HOSTNAME", "?")
    print("START pid=%d host=%s rank=%d size=%d" %
          (os.getpid(), host, hvd.rank(), hvd.size()), flush=True)
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, optimizer, step=0)
    since_reset = {"pending": False, "resets": 0, "world": None}
    progress = {"last_step": 0, "last_commit": 0}

    def identical():
        flat = torch.cat([p.detach().flatten() for p in model.parameters()])
        rows = hvd.allgather(flat.unsqueeze(0))
        return bool((rows == rows[0]).all())

    def on_reset():
        since_reset["pending"] = True
        since_reset["resets"] += 1
        print("RESET t=%.6f size=%d world=%s last_step=%d last_commit=%d "
              "restored=%d" % (time.time(), hvd.size(),
                               hvd.elastic.world_version(),
                               progress["last_step"], progress["last_commit"],
                               state.step), flush=True)

    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state):
        while state.step < args.steps:
            from_step = state.step
            g = torch.Generator().manual_seed(state.step * 1000 + hvd.rank())
            x = torch.randn(8, 16, generator=g)
            y = x.sum(dim=1, keepdim=True)
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            state.step += 1
            progress["last_step"] = state.step
            if since_reset["pending"]:
                since_reset["pending"] = False
                print("FIRST_STEP t=%.6f size=%d world=%s from_step=%d" %
                      (time.time(), hvd.size(), hvd.elastic.world_version(),
                       from_step), flush=True)
            if since_reset["world"] != hvd.elastic.world_version():
                # The first step of every world (every rank of it: new
                # ones too): the parameters must agree everywhere.
                since_reset["world"] = hvd.elastic.world_version()
                print("WORLD_CHECK world=%s size=%d identical=%s" %
                      (since_reset["world"], hvd.size(), identical()),
                      flush=True)
            print("STEP %d rank=%d size=%d" %
                  (state.step, hvd.rank(), hvd.size()), flush=True)
            if state.step % args.commit_every == 0:
                if args.tune_report and hvd.rank() == 0:
                    st = hvd.autotune_status()
                    print("TUNE world=%s size=%d phase=%s samples=%d "
                          "source=%s" % (hvd.elastic.world_version(),
                                         hvd.size(), st["phase"],
                                         st["samples"], st["source"] or "-"),
                          flush=True)
                # commit() saves first, then may raise (a hosts update, a
                # failed broadcast): the save counts either way.
                progress["last_commit"] = state.step
                state.commit()
            time.sleep(args.sleep)

    train(state)
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    same = identical()
    print("DONE rank=%d size=%d identical=%s checksum=%.9g resets=%d" %
          (hvd.rank(), hvd.size(), same, float(flat.double().sum()),
           since_reset["resets"]), flush=True)
    sys.exit(0 if same else 3)


if __name__ == "__main__":
    main()
