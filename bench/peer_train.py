#!/usr/bin/env python3
"""peer_train: training throughput of one torchvision model, data parallel,
under PyTorch's DistributedDataParallel (gloo; every bucket size with and
without gradient_as_bucket_view and static_graph) and under
hvdtune.torch.DistributedOptimizer (default knobs, and tuned online with
HOROVOD_AUTOTUNE=1; --no-horovod-api leaves it out), with --ddp-hvdtune the
same DDP on hvdtune's torch.distributed backend (default knobs and
autotuned), with --zero DDP + ZeroRedundancyOptimizer on gloo and on
hvdtune, as interleaved mpirun jobs on the same ranks:

    /usr/bin/python3 bench/peer_train.py --ranks 2,4 --rounds 3 \\
        --model mobilenet_v2 --image-size 32 --batch-size 16

With --cluster the jobs run on the emulated cluster (tools/cluster.sh up
NODES RANKS_PER_NODE --link PRESET first; HVDTUNE_CLUSTER names it), all
its ranks, gloo's rendezvous on node 0's address inside the cluster.

With --launcher torchrun the DDP jobs (both backends) are started by
torchrun instead of mpirun: one agent per node (on the cluster, each inside
its node's namespace, all meeting at node 0's address), so DDP on hvdtune
runs the runtime on the Gloo engine, as a DDP job started by torchrun
does. The Horovod-API configurations need mpirun (--no-horovod-api).

Every configuration runs once per round, rounds rotate the order, and the
table reports each configuration's median img/s (all ranks together: ranks
x batch x steps / the slowest rank's seconds). Each job warms up, then (the
autotuned one only) trains until the tuner froze, then times
--measure-steps steps. For the autotuned job it also reports the cost of
tuning: the seconds spent between the warm-up and the freeze, and its
throughput counted over that phase and the timed steps together (what a
job of that many steps would see). The same script is the worker
(--worker) that mpirun starts.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)


def common_args(p):
    p.add_argument("--model", default="mobilenet_v2",
                   help="a torchvision.models constructor")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--batch-size", type=int, default=16,
                   help="images per rank per step")
    p.add_argument("--num-classes", type=int, default=10)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--measure-steps", type=int, default=20)
    p.add_argument("--tune-max-steps", type=int, default=150,
                   help="autotuned runs: most steps to wait for the freeze")


# ---------------------------------------------------------------------------
# Worker: one job.


def ddp_setup(args, model):
    """DDP on gloo (mode "ddp") or on hvdtune's torch.distributed backend
    (mode "ddp-hvdtune", the same DDP with backend="hvdtune")."""
    import torch
    import torch.distributed as dist
    backend = "gloo"
    if args.mode == "ddp-hvdtune":
        import hvdtune
        import hvdtune.torch  # noqa: F401  registers the backend
        backend = "hvdtune"
    if "OMPI_COMM_WORLD_RANK" in os.environ:
        rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
        size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
        dist.init_process_group(backend, rank=rank, world_size=size)
    else:
        # torchrun: rank, world size and store from its environment.
        dist.init_process_group(backend)
        rank, size = dist.get_rank(), dist.get_world_size()
    net = torch.nn.parallel.DistributedDataParallel(
        model, bucket_cap_mb=args.bucket_cap_mb,
        gradient_as_bucket_view=args.bucket_view,
        static_graph=args.static_graph)
    if args.zero:
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(net.parameters(),
                                      optimizer_class=torch.optim.SGD,
                                      lr=0.01)
    else:
        opt = torch.optim.SGD(net.parameters(), lr=0.01)

    def slowest(seconds):
        t = torch.tensor([seconds], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t)

    def frozen():
        if backend == "gloo":
            return True
        # Rank 0 tunes; every rank must take the same decision.
        done = hvdtune.autotune_status()["phase"] in ("frozen", "off")
        flag = torch.tensor([1 if done else 0], dtype=torch.int32)
        dist.broadcast(flag, 0)
        return bool(flag[0])

    return net, opt, dist.barrier, slowest, frozen, rank, size


def worker(args):
    import torch
    import torch.nn.functional as F
    import torchvision.models

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)(
        num_classes=args.num_classes)
    x = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
    y = torch.randint(0, args.num_classes, (args.batch_size,))

    if args.mode in ("ddp", "ddp-hvdtune"):
        net, opt, barrier, slowest, frozen, rank, size = ddp_setup(args, model)
    else:
        import hvdtune.torch as hvd
        hvd.init()
        init_time = time.perf_counter()
        rank, size = hvd.rank(), hvd.size()
        net = model
        opt = hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.01),
            named_parameters=model.named_parameters())
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)

        def barrier():
            hvd.allreduce(torch.zeros(1), name="peer.barrier")

        def slowest(seconds):
            return float(
                hvd.allreduce(torch.tensor([seconds], dtype=torch.float64),
                              op=hvd.Max, name="peer.slowest"))

        def frozen():
            # Rank 0 tunes; every rank must take the same decision.
            done = hvd.autotune_status()["phase"] in ("frozen", "off")
            flag = torch.tensor([1 if done else 0], dtype=torch.int32)
            return bool(hvd.broadcast(flag, 0, name="peer.frozen")[0])

    def step():
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()

    for _ in range(args.warmup_steps):
        step()
    tuning_steps = 0
    barrier()
    tune_start = time.perf_counter()
    if os.environ.get("HOROVOD_AUTOTUNE") == "1":
        while tuning_steps < args.tune_max_steps and not frozen():
            step()
            tuning_steps += 1
    barrier()
    start = time.perf_counter()
    tuning_seconds = slowest(start - tune_start)
    for _ in range(args.measure_steps):
        step()
    seconds = slowest(time.perf_counter() - start)
    images = size * args.batch_size
    result = {
        "mode": args.mode, "ranks": size, "model": args.model,
        "bucket_cap_mb": args.bucket_cap_mb if args.mode != "hvdtune" else None,
        "gradient_as_bucket_view": args.bucket_view,
        "static_graph": args.static_graph,
        "zero": args.zero,
        "img_per_sec": images * args.measure_steps / seconds,
        "tuning_steps": tuning_steps,
        "tuning_seconds": tuning_seconds,
        # Tuning and the timed steps together (the warm-up left out, as for
        # every configuration).
        "img_per_sec_with_tuning": images * (tuning_steps + args.measure_steps)
        / (tuning_seconds + seconds),
    }
    if args.mode == "ddp-hvdtune":
        import hvdtune
        # The backend starts the runtime on the Gloo engine where no MPI
        # launcher started the job (torchrun).
        result["engine"] = ("gloo" if os.environ.get("HOROVOD_GLOO") == "1"
                            else "mpi")
        status = hvdtune.autotune_status()
        result["autotune_phase"] = status["phase"]
        result["autotune_samples"] = status["samples"]
        if status["phase"] == "frozen":
            result["frozen_knobs"] = status["best"]
    if args.mode == "hvdtune":
        status = hvd.autotune_status()
        result["autotune_phase"] = status["phase"]
        result["autotune_samples"] = status["samples"]
        if status["phase"] == "frozen":
            result["frozen_knobs"] = status["best"]
        # Where the cycle thread's time went (rank 0): negotiation includes
        # waiting inside MPI for the other ranks' cycle threads.
        stats = hvd.stats()
        result["negotiation_share"] = stats["negotiation_seconds"] / (
            time.perf_counter() - init_time)
        result["cycles"] = stats["cycles"]
    if rank == 0:
        print("PEER_RESULT " + json.dumps(result), flush=True)
    if args.mode == "hvdtune":
        hvd.shutdown()
    elif args.mode == "ddp-hvdtune":
        import torch.distributed as dist
        dist.destroy_process_group()
    else:
        # torch 1.13's gloo teardown (destroy_process_group) hung now and
        # then on rank 0 with 4 ranks here; every rank is done with the
        # group, so leave without it.
        sys.stdout.flush()
        os._exit(0)


# ---------------------------------------------------------------------------
# Driver: interleaved jobs, medians.


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# In a configuration's environment: the launcher of that configuration's
# jobs, where it is not --launcher's (never passed on to the job).
LAUNCHER_KEY = "PEER_TRAIN_LAUNCHER"


def autotune_env(samples):
    return {
        "HOROVOD_AUTOTUNE": "1",
        "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": "1",
        "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "3",
        "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": str(samples),
        "HVDTUNE_AUTOTUNE_RETUNE_DROP": "0",
        "HVDTUNE_AUTOTUNE_STORE": "off",
    }


def ddp_label(mb, view, static):
    return "ddp bucket %g MB%s%s" % (mb, ", bucket view" if view else "",
                                     ", static graph" if static else "")


def configurations(bucket_sizes, tune_samples, ddp_flags, ddp_hvdtune=False,
                   horovod_api=True, zero=False, hvdtune_bucket_sizes=(25,),
                   hvdtune_launchers=(None,)):
    """(label, mode, DDP options or None, env) of every configuration. DDP
    options: (bucket MB, gradient_as_bucket_view, static_graph, ZeRO)."""
    configs = []
    if horovod_api:
        configs += [("hvdtune default", "hvdtune", None, {}),
                    ("hvdtune autotuned", "hvdtune", None,
                     autotune_env(tune_samples))]
    for mb in bucket_sizes:
        for view, static in ddp_flags:
            configs.append((ddp_label(mb, view, static), "ddp",
                            (mb, view, static, False), {}))
    if ddp_hvdtune:
        configs += ddp_hvdtune_configurations(
            tune_samples, hvdtune_bucket_sizes, hvdtune_launchers)
    if zero:
        configs += [("zero gloo", "ddp", (25, False, False, True), {}),
                    ("zero hvdtune", "ddp-hvdtune", (25, False, False, True),
                     {})]
    return configs


def ddp_hvdtune_configurations(tune_samples, bucket_sizes=(25,),
                               launchers=(None,)):
    """--ddp-hvdtune: DDP on the hvdtune backend at the default knobs and
    autotuned, at each of `bucket_sizes` (MB; DDP's default 25 unless
    --hvdtune-bucket-sizes says otherwise), started by each of `launchers`
    (None: --launcher's)."""
    configs = []
    for launcher in launchers:
        for mb in bucket_sizes:
            suffix = "" if mb == 25 else ", bucket %g MB" % mb
            env = {}
            if launcher:
                suffix += " (%s)" % launcher
                env[LAUNCHER_KEY] = launcher
            configs += [("ddp-hvdtune default" + suffix, "ddp-hvdtune",
                         (mb, False, False, False), env),
                        ("ddp-hvdtune autotuned" + suffix, "ddp-hvdtune",
                         (mb, False, False, False),
                         dict(env, **autotune_env(tune_samples)))]
    return configs


def cluster_status():
    """(nodes, ranks per node, node 0's address) of the emulated cluster
    that is up."""
    out = subprocess.run([os.path.join(SOURCE, "tools", "cluster.sh"),
                          "status"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("peer_train: --cluster: no emulated cluster is up "
                 "(tools/cluster.sh up NODES RANKS_PER_NODE --link PRESET): "
                 + out.stderr.strip())
    nodes = per_node = 0
    addr = None
    for line in out.stdout.splitlines():
        words = line.split()
        if "nodes" in words and "x" in words:
            nodes = int(words[words.index("nodes") - 1])
            per_node = int(words[words.index("x") + 1])
        if words and words[0] == "node0":
            addr = words[1]
    if not nodes or not addr:
        sys.exit("peer_train: cannot read the cluster's layout from: "
                 + out.stdout)
    return nodes, per_node, addr


def torchrun_agents(args, ranks, script_args, env):
    """The commands of one torchrun job: one agent per node (on the
    cluster, each in its node's namespace), all meeting at node 0."""
    nodes, per_node, addr = 1, ranks, "127.0.0.1"
    if args.cluster:
        nodes, per_node, addr = cluster_status()
    # Inside a node's namespace no other job listens, but a port of an
    # earlier job may still be in TIME_WAIT: a fresh one per job.
    port = free_port() if not args.cluster else 20000 + (
        os.getpid() * 7919 + int(time.time() * 1000)) % 40000
    env["MASTER_ADDR"], env["MASTER_PORT"] = addr, str(port)
    agents = []
    for node in range(nodes):
        prefix = []
        if args.cluster:
            prefix = [os.path.join(SOURCE, "tools", "cluster.sh"), "exec",
                      "--node", str(node)]
        # torch 1.13 on Python 3.11 cannot parse torchrun's default
        # --redirects/--tee of 0 (python/tests/torchrun.py).
        agents.append(prefix + [
            sys.executable, "-m", "torch.distributed.run", "--nnodes",
            str(nodes), "--node_rank", str(node), "--nproc_per_node",
            str(per_node), "--master_addr", addr, "--master_port", str(port),
            "--redirects", "2", "--tee", "2"] + script_args)
    return agents


def run_agents(agents, env, timeout):
    """Runs the agents of one job together; (stdout of node 0's agent,
    stderr of all, the first failing exit status or 0)."""
    import tempfile
    procs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, cmd in enumerate(agents):
            out = open(os.path.join(tmp, "out%d" % i), "w+")
            err = open(os.path.join(tmp, "err%d" % i), "w+")
            procs.append((subprocess.Popen(cmd, stdout=out, stderr=err,
                                           env=env, start_new_session=True),
                          out, err))
        deadline = time.monotonic() + timeout
        try:
            for proc, _, _ in procs:
                proc.wait(timeout=max(1, deadline - time.monotonic()))
        finally:
            for proc, _, _ in procs:
                if proc.poll() is None:
                    os.killpg(proc.pid, 9)
                    proc.wait()
        texts = []
        for _, out, err in procs:
            out.seek(0)
            err.seek(0)
            texts.append((out.read(), err.read()))
            out.close()
            err.close()
    rc = next((p.returncode for p, _, _ in procs if p.returncode), 0)
    return texts[0][0], "".join(e for _, e in texts), rc


def run_one(args, ranks, mode, ddp, extra_env):
    env = dict(os.environ)
    env.update(extra_env)
    launcher = env.pop(LAUNCHER_KEY, args.launcher)
    env["OMP_NUM_THREADS"] = "1"
    env["MASTER_ADDR"] = "127.0.0.1"
    env["MASTER_PORT"] = str(free_port())
    build_python = os.path.join(args.build, "python")
    env["PYTHONPATH"] = build_python + os.pathsep + env.get("PYTHONPATH", "")
    launch = [os.path.join(SOURCE, "tools", "mpirun.sh"), "-np", str(ranks)]
    if args.cluster:
        nodes, per_node, env["MASTER_ADDR"] = cluster_status()
        ranks = nodes * per_node
        # Every node has eth0 on the cluster's subnet; forward what the
        # workers need (cluster.sh forwards HOROVOD_*/HVDTUNE_* itself).
        env["GLOO_SOCKET_IFNAME"] = "eth0"
        env["HVDTUNE_CLUSTER_MPIRUN_ARGS"] = " ".join(
            "-x " + v for v in ("MASTER_ADDR", "MASTER_PORT",
                                "GLOO_SOCKET_IFNAME", "PYTHONPATH",
                                "OMP_NUM_THREADS"))
        launch = [os.path.join(SOURCE, "tools", "cluster.sh"), "run"]
    script = [
        os.path.abspath(__file__), "--worker", "--mode", mode,
        "--bucket-cap-mb", str(ddp[0] if ddp else 25), "--model", args.model,
        "--image-size", str(args.image_size), "--batch-size",
        str(args.batch_size), "--num-classes", str(args.num_classes),
        "--warmup-steps", str(args.warmup_steps), "--measure-steps",
        str(args.measure_steps), "--tune-max-steps", str(args.tune_max_steps)
    ] + (["--bucket-view"] if ddp and ddp[1] else []) + (
        ["--static-graph"] if ddp and ddp[2] else []) + (
            ["--zero"] if ddp and ddp[3] else [])
    if launcher == "torchrun" and mode != "hvdtune":
        agents = torchrun_agents(args, ranks, script, env)
        cmd = agents[0]
        stdout, stderr, _ = run_agents(agents, env, args.timeout)
    else:
        cmd = launch + [sys.executable] + script
        job = subprocess.run(cmd, capture_output=True, text=True, env=env,
                             timeout=args.timeout)
        stdout, stderr = job.stdout, job.stderr
    for line in stdout.splitlines():
        if line.startswith("PEER_RESULT "):
            return json.loads(line[len("PEER_RESULT "):])
    raise RuntimeError("job failed (%s): %s\n%s" %
                       (" ".join(cmd), stdout[-2000:], stderr[-4000:]))


def failed_run(label, error):
    """A job that crashed, hung or printed no result: recorded as a failure,
    never as a measurement."""
    return {"failed": True, "label": label, "error": str(error)[-2000:]}


def driver(args):
    layout = cluster_status() if args.cluster else None
    ranks_list = ([layout[0] * layout[1]] if args.cluster else
                  [int(r) for r in args.ranks.split(",")])
    buckets = [float(b) for b in args.bucket_sizes.split(",")]
    flags = [(False, False)]
    if args.bucket_view_only:
        flags = [(False, False), (True, False)]
    elif args.ddp_flags:
        flags = [(False, False), (True, False), (False, True), (True, True)]
    configs = configurations(
        buckets, args.tune_samples, flags, args.ddp_hvdtune, args.horovod_api,
        args.zero, [float(b) for b in args.hvdtune_bucket_sizes.split(",")],
        args.hvdtune_launchers.split(",") if args.hvdtune_launchers else
        [None])
    results = {}
    for ranks in ranks_list:
        for rnd in range(args.rounds):
            order = configs[rnd % len(configs):] + configs[:rnd % len(configs)]
            for label, mode, ddp, env in order:
                try:
                    r = run_one(args, ranks, mode, ddp, env)
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    r = failed_run(label, e)
                    print("# %d ranks, round %d, %-40s FAILED: %s" %
                          (ranks, rnd + 1, label, str(e)[:300]), flush=True)
                    results.setdefault((ranks, label), []).append(r)
                    continue
                results.setdefault((ranks, label), []).append(r)
                print("# %d ranks, round %d, %-40s %8.1f img/s%s%s" %
                      (ranks, rnd + 1, label, r["img_per_sec"],
                       " (%s engine)" % r["engine"] if "engine" in r else "",
                       "  (tuned %d steps in %.1f s, %.1f img/s with them, "
                       "%s)" % (r["tuning_steps"], r["tuning_seconds"],
                                r["img_per_sec_with_tuning"],
                                r.get("frozen_knobs"))
                       if r["tuning_steps"] else ""),
                      flush=True)
    summary = []
    for ranks in ranks_list:
        meds = {}
        for label, _, _, _ in configs:
            ok = [r["img_per_sec"] for r in results[(ranks, label)]
                  if not r.get("failed")]
            meds[label] = statistics.median(ok) if ok else None
        # DDP on gloo (not DDP on the hvdtune backend, nor ZeRO).
        ddp = {l: m for l, m in meds.items()
               if l.startswith("ddp bucket") and m is not None}
        base_label = ddp_label(25, False, False)
        best_label = max(ddp, key=ddp.get)
        print("\n%d ranks; DDP's best: %s" % (ranks, best_label))
        print("| configuration | img/s, rounds | median | vs DDP default | "
              "vs DDP's best |")
        print("|---|---|---|---|---|")
        for label, _, _, _ in configs:
            runs = results[(ranks, label)]
            med = meds[label]
            cells = ", ".join("failed" if r.get("failed") else
                              "%.1f" % r["img_per_sec"] for r in runs)
            failed = sum(1 for r in runs if r.get("failed"))
            summary.append({"ranks": ranks, "configuration": label,
                            "runs": runs, "median": med, "failed": failed})
            if med is None:
                print("| %s | %s | failed | | |" % (label, cells))
                continue
            print("| %s | %s | %.1f | %.2fx | %.2fx |" %
                  (label, cells, med, med / meds[base_label],
                   med / ddp[best_label]))
        for label in [c[0] for c in configs if "autotuned" in c[0]]:
            tuned = [r for r in results.get((ranks, label), [])
                     if not r.get("failed")]
            if not tuned:
                continue
            with_tuning = statistics.median(r["img_per_sec_with_tuning"]
                                            for r in tuned)
            print("\n%s, cost of tuning: %s steps, %s s until the "
                  "freeze; counted with those steps (%d timed steps after "
                  "them): %s img/s, median %.1f = %.2fx DDP's best" % (
                      label,
                      ", ".join(str(r["tuning_steps"]) for r in tuned),
                      ", ".join("%.1f" % r["tuning_seconds"] for r in tuned),
                      args.measure_steps,
                      ", ".join("%.1f" % r["img_per_sec_with_tuning"]
                                for r in tuned),
                      with_tuning, with_tuning / ddp[best_label]))
        if meds.get("zero gloo") and meds.get("zero hvdtune"):
            print("\nZeRO on hvdtune: %.2fx ZeRO on gloo" %
                  (meds["zero hvdtune"] / meds["zero gloo"]))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"args": vars(args), "summary": summary,
                       "runs": {"%d %s" % k: v
                                for k, v in results.items()}}, f, indent=1)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_args(p)
    p.add_argument("--worker", action="store_true",
                   help="run one job's rank (mpirun starts this)")
    p.add_argument("--mode", choices=["hvdtune", "ddp", "ddp-hvdtune"],
                   default="hvdtune")
    p.add_argument("--ddp-hvdtune", action="store_true",
                   help="also DDP on hvdtune's torch.distributed backend "
                   "(default knobs and autotuned)")
    p.add_argument("--bucket-cap-mb", type=float, default=25)
    p.add_argument("--hvdtune-bucket-sizes", default="25",
                   help="--ddp-hvdtune: DDP bucket_cap_mb values of the "
                   "hvdtune backend's configurations (25 is DDP's default)")
    p.add_argument("--hvdtune-launchers", default="",
                   help="--ddp-hvdtune: its configurations once per launcher "
                   "of this list (mpirun,torchrun; labelled with it), the "
                   "others by --launcher")
    p.add_argument("--bucket-view", action="store_true",
                   help="worker: DDP's gradient_as_bucket_view=True")
    p.add_argument("--static-graph", action="store_true",
                   help="worker: DDP's static_graph=True")
    p.add_argument("--no-ddp-flags", dest="ddp_flags", action="store_false",
                   help="DDP at its default gradient_as_bucket_view and "
                   "static_graph only (else every bucket size with each of "
                   "the four combinations)")
    p.add_argument("--bucket-view-only", action="store_true",
                   help="DDP with and without gradient_as_bucket_view only "
                   "(static_graph off)")
    p.add_argument("--no-horovod-api", dest="horovod_api",
                   action="store_false",
                   help="leave out hvdtune.torch.DistributedOptimizer")
    p.add_argument("--zero", action="store_true",
                   help="also DDP + ZeroRedundancyOptimizer (SGD, 25 MB "
                   "buckets) on gloo and on the hvdtune backend; worker: use "
                   "ZeroRedundancyOptimizer")
    p.add_argument("--ranks", default="2,4")
    p.add_argument("--tune-samples", type=int, default=8,
                   help="autotuned runs: the tuner's sample budget "
                   "(HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES)")
    p.add_argument("--cluster", action="store_true",
                   help="run on the emulated cluster that is up (all its "
                   "ranks; --ranks is ignored)")
    p.add_argument("--launcher", choices=["mpirun", "torchrun"],
                   default="mpirun",
                   help="what starts the DDP jobs (both backends): mpirun "
                   "(DDP on hvdtune then runs the MPI engine) or torchrun "
                   "(the Gloo engine)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--bucket-sizes", default="1,5,25,100",
                   help="DDP bucket_cap_mb values (25 is DDP's default)")
    p.add_argument("--build", default=os.path.join(SOURCE, "build"),
                   help="build directory holding python/hvdtune")
    p.add_argument("--timeout", type=int, default=600,
                   help="seconds one job may take")
    p.add_argument("--json-out", help="write every run and the medians here")
    args = p.parse_args()
    if args.worker:
        worker(args)
        return 0
    if args.launcher == "torchrun" and args.horovod_api:
        p.error("--launcher torchrun runs the DDP configurations only: add "
                "--no-horovod-api (hvdtune.torch's jobs need mpirun)")
    for launcher in filter(None, args.hvdtune_launchers.split(",")):
        if launcher not in ("mpirun", "torchrun"):
            p.error("--hvdtune-launchers: unknown launcher %r (mpirun, "
                    "torchrun)" % launcher)
    if "25" not in [("%g" % float(b)) for b in args.bucket_sizes.split(",")]:
        p.error("--bucket-sizes must include 25 (DDP's default)")
    return driver(args)


if __name__ == "__main__":
    sys.exit(main())
