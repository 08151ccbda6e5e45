"""hvdtune.torch against what a Horovod script relies on beyond the plain
collectives: the build introspection, error types, handle semantics,
gradients of every collective, scaling of integer tensors, optimizer state
broadcast, sparse gradients, SyncBatchNorm and the refusals (run under
`mpirun -np N python -m pytest`)."""

import json
import os
import time
import warnings

import pytest
import torch

import hvdtune.torch as hvd


@pytest.fixture(scope="module", autouse=True)
def runtime():
    hvd.init()
    yield
    # No rank shuts the job down (at exit) while another is still testing.
    hvd.allreduce(torch.zeros(1), name="api.teardown")


def n_r():
    return hvd.size(), hvd.rank()


def test_build_introspection_matches_this_build():
    assert hvd.mpi_built()
    gloo = os.environ.get("HOROVOD_CONTROLLER") == "gloo"
    assert hvd.gloo_enabled() == gloo and hvd.mpi_enabled() == (not gloo)
    # This build has Gloo where libgloo-dev was found (CI installs it).
    assert hvd.gloo_built() or not gloo
    for refused in (hvd.ddl_built, hvd.ccl_built, hvd.rocm_built):
        assert not refused(), refused.__name__
    # NCCL: built when CMake found CUDA and NCCL; in use only with a GPU.
    assert hvd.cuda_built() == bool(hvd.nccl_built())
    if hvd.cuda_built():
        assert hvd.nccl_built() >= 20000  # a version code: 2.x.y
        assert not hvd.has_nccl() or torch.cuda.is_available()
    else:
        assert hvd.nccl_built() == 0 and not hvd.has_nccl()
        assert "without CUDA" in hvd.nccl_unavailable()
    assert hvd.has_nccl() == (hvd.nccl_unavailable() == "")
    if not gloo:
        # The runtime asks MPI for MPI_THREAD_MULTIPLE; Open MPI grants it.
        assert hvd.mpi_threads_supported() is True


def test_error_types():
    assert issubclass(hvd.HorovodInternalError, RuntimeError)
    assert issubclass(hvd.InvalidArgumentError, ValueError)
    assert issubclass(hvd.InvalidArgumentError, hvd.HvdtuneError)
    n, r = n_r()
    if n == 1:
        return
    # Ranks disagreeing on a shape: the collective fails on every rank.
    with pytest.raises(hvd.HorovodInternalError) as info:
        hvd.allreduce(torch.ones(3 + r), name="api.shape_mismatch")
    assert info.value.code == "mismatch"


def test_duplicate_name_in_flight_raises_on_the_caller():
    n, r = n_r()
    if n < 2:
        pytest.skip("an op of one rank may complete before the second call")
    t = torch.full((4,), float(r))
    total = torch.full((4,), float(sum(range(n))))

    def expect_refused(name):
        with pytest.raises(ValueError, match=name + ".*already in flight"):
            hvd.allreduce_async(t, name=name, op=hvd.Sum)
        with pytest.raises(ValueError, match="already in flight"):
            hvd.allgather_async(t, name=name)

    # An op completes only once every rank submitted it, so each rank checks
    # while an op is surely in flight: rank 0 checks "api.dup.a" before the
    # others submit it, the others check "api.dup.b" before rank 0 does.
    if r == 0:
        a = hvd.allreduce_async(t, name="api.dup.a", op=hvd.Sum)
        expect_refused("api.dup.a")
        hvd.barrier()
        hvd.barrier()
        b = hvd.allreduce_async(t, name="api.dup.b", op=hvd.Sum)
    else:
        hvd.barrier()
        a = hvd.allreduce_async(t, name="api.dup.a", op=hvd.Sum)
        b = hvd.allreduce_async(t, name="api.dup.b", op=hvd.Sum)
        expect_refused("api.dup.b")
        hvd.barrier()
    # The first ones are unharmed.
    assert torch.equal(hvd.synchronize(a), total)
    assert torch.equal(hvd.synchronize(b), total)
    # A name is free again once its op completed.
    again = hvd.allreduce(t, name="api.dup.a", op=hvd.Sum)
    assert torch.equal(again, total)


def test_async_forms_return_pollable_handles():
    n, r = n_r()
    t = torch.full((3,), float(r + 1))
    handles = {
        "allreduce": hvd.allreduce_async(t, op=hvd.Sum),
        "allreduce_": hvd.allreduce_async_(t.clone(), op=hvd.Sum),
        "grouped": hvd.grouped_allreduce_async([t, t * 2], op=hvd.Sum),
        "grouped_": hvd.grouped_allreduce_async_([t.clone()], op=hvd.Sum),
        "broadcast": hvd.broadcast_async(t, 0),
        "broadcast_": hvd.broadcast_async_(t.clone(), 0),
        "allgather": hvd.allgather_async(t),
        "grouped_allgather": hvd.grouped_allgather_async([t, t[:1]]),
    }
    deadline = time.monotonic() + 30
    while not all(hvd.poll(h) for h in handles.values()):
        assert time.monotonic() < deadline, "handles never completed"
        time.sleep(0.001)
    total = float(n * (n + 1) // 2)
    out = {k: hvd.synchronize(h) for k, h in handles.items()}
    assert torch.equal(out["allreduce"], torch.full((3,), total))
    assert torch.equal(out["allreduce_"], torch.full((3,), total))
    assert torch.equal(out["grouped"][1], torch.full((3,), 2 * total))
    assert torch.equal(out["broadcast"], torch.ones(3))
    assert torch.equal(out["broadcast_"], torch.ones(3))
    assert out["allgather"].shape == (3 * n,)
    assert [g.shape[0] for g in out["grouped_allgather"]] == [3 * n, n]


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float16,
                                   torch.float32, torch.float64])
def test_prescale_and_postscale_keep_the_dtype(dtype):
    n, r = n_r()
    base = torch.tensor([-7, -3, 0, 5, 9, 100]) * (r + 1)
    t = base.to(dtype)
    pre = hvd.allreduce(t, op=hvd.Sum, prescale_factor=0.37)
    post = hvd.allreduce(t, op=hvd.Sum, postscale_factor=0.37)
    assert pre.dtype == dtype and post.dtype == dtype
    # The factor is applied in float64 for integers (float32 for float16)
    # and the product cast back, before (pre) or after (post) the sum.
    wide = torch.float64 if not dtype.is_floating_point else (
        torch.float32 if dtype == torch.float16 else dtype)
    expect_pre = sum((torch.tensor([-7, -3, 0, 5, 9, 100]) *
                      (k + 1)).to(dtype).to(wide) * 0.37
                     for k in range(n))
    if not dtype.is_floating_point or dtype == torch.float16:
        expect_pre = sum(((torch.tensor([-7, -3, 0, 5, 9, 100]) *
                           (k + 1)).to(dtype).to(wide) * 0.37).to(dtype)
                         for k in range(n))
    total = sum((torch.tensor([-7, -3, 0, 5, 9, 100]) * (k + 1)).to(dtype)
                for k in range(n))
    expect_post = (total.to(wide) * 0.37).to(dtype)
    tol = 1e-2 if dtype == torch.float16 else 1e-6
    assert torch.allclose(pre.double(), expect_pre.double(), atol=tol)
    assert torch.allclose(post.double(), expect_post.double(), atol=tol)
    # In place too.
    c = t.clone()
    hvd.allreduce_(c, op=hvd.Sum, postscale_factor=0.37)
    assert torch.equal(c, post)


def test_allgather_gradient_is_this_ranks_slice_of_the_average():
    n, r = n_r()
    x = torch.full((r + 1, 2), 1.0, requires_grad=True)
    y = hvd.allgather(x)
    assert y.shape == (n * (n + 1) // 2, 2)
    # Upstream gradient: row i weighted (i + 1) * (rank + 1), so the ranks'
    # gradients differ and the average is checkable.
    rows = torch.arange(1, y.shape[0] + 1, dtype=torch.float32)
    (y * rows.unsqueeze(1) * (r + 1)).sum().backward()
    mean_scale = sum(k + 1 for k in range(n)) / n
    offset = r * (r + 1) // 2
    expected = rows[offset:offset + r + 1].unsqueeze(1).expand(r + 1, 2)
    assert torch.allclose(x.grad, expected * mean_scale)


def test_broadcast_gradient_goes_to_the_root_only():
    n, r = n_r()
    for root in range(n):
        x = torch.full((3,), float(r), requires_grad=True)
        y = hvd.broadcast(x, root)
        assert torch.equal(y.detach(), torch.full((3,), float(root)))
        (y * (r + 1)).sum().backward()
        mean_scale = sum(k + 1 for k in range(n)) / n
        expected = mean_scale if r == root else 0.0
        assert torch.allclose(x.grad, torch.full((3,), expected))


def test_grouped_allreduce_gradient_and_compression():
    n, r = n_r()
    a = torch.ones(3, requires_grad=True)
    b = torch.ones(2, 2, requires_grad=True)
    ya, yb = hvd.grouped_allreduce([a * (r + 1), b], op=hvd.Sum)
    (ya.sum() + 2 * yb.sum()).backward()
    # Sum's gradient is the sum of the upstream gradients over the ranks.
    assert torch.allclose(a.grad, torch.full((3,), float(n * (r + 1))))
    assert torch.allclose(b.grad, torch.full((2, 2), 2.0 * n))
    t = torch.full((4,), 0.5 + r)
    out = hvd.grouped_allreduce([t, t.double()],
                                compression=hvd.Compression.fp16,
                                op=hvd.Sum)
    assert [o.dtype for o in out] == [torch.float32, torch.float64]
    expected = sum(0.5 + k for k in range(n))
    assert torch.allclose(out[0], torch.full((4,), expected))


def test_refusals_say_so_and_name_the_alternative():
    with pytest.raises(ValueError, match="Adasum.*Average"):
        hvd.allreduce(torch.ones(2), op=hvd.Adasum)
    with pytest.raises(ValueError, match="device 'meta'.*CPU and CUDA"):
        hvd.allreduce(torch.ones(2, device="meta"))
    # Elastic training is there (hvd.elastic, docs/elastic.md).
    assert callable(hvd.elastic.run) and hvd.elastic.TorchState
    n, _ = n_r()
    if n > 1:
        with pytest.raises(ValueError, match="was not added"):
            hvd.allreduce(torch.ones(1), process_set=hvd.ProcessSet([0]))
    # The whole job as a set is the global set.
    assert hvd.add_process_set(list(range(n))) is hvd.global_process_set
    hvd.allreduce(torch.ones(1), process_set=hvd.global_process_set)


def test_init_accepts_horovods_arguments_for_the_whole_job():
    n, _ = n_r()
    hvd.init(comm=list(range(n)))
    hvd.init(process_sets="dynamic")
    hvd.init(process_sets=[hvd.ProcessSet(list(range(n)))])
    if n > 1:
        with pytest.raises(ValueError, match="all %d ranks" % n):
            hvd.init(comm=[0])
    assert hvd.is_initialized()


def test_barrier_waits_for_every_rank():
    n, r = n_r()
    if n == 1:
        hvd.barrier()
        return
    hvd.barrier()
    start = time.monotonic()
    if r == n - 1:
        time.sleep(0.5)
    hvd.barrier()
    assert time.monotonic() - start >= 0.45


def make_net(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(),
                               torch.nn.Linear(5, 2))


@pytest.mark.parametrize("cls,kwargs", [
    (torch.optim.Adam, {"lr": 0.01}),
    (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
    (torch.optim.RMSprop, {"lr": 0.01, "centered": True}),
])
def test_broadcast_optimizer_state_before_the_first_step(cls, kwargs):
    n, r = n_r()
    model = make_net(seed=3)
    kwargs = dict(kwargs, lr=kwargs["lr"] * (r + 1))
    opt = hvd.DistributedOptimizer(
        cls(model.parameters(), **kwargs),
        named_parameters=model.named_parameters())
    assert not opt.state_dict()["state"]
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    state = opt.state_dict()
    # The state exists now, and is root's on every rank.
    assert len(state["state"]) == len(list(model.parameters()))
    assert state["param_groups"][0]["lr"] == pytest.approx(
        kwargs["lr"] / (r + 1))
    flat = torch.cat([
        v.reshape(-1).float() for s in state["state"].values()
        for v in s.values() if torch.is_tensor(v)
    ])
    g = hvd.allgather(flat.unsqueeze(0))
    assert all(torch.equal(g[k], flat) for k in range(n))
    # Training goes on with it (the step allreduces as usual).
    x = torch.randn(4, 6)
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()


def test_broadcast_optimizer_state_with_a_sparse_embedding_model():
    model = torch.nn.Embedding(7, 3, sparse=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    hvd.broadcast_optimizer_state(opt, root_rank=0, model=model)
    assert model.weight.grad.is_sparse
    assert len(opt.state_dict()["state"]) == 1


def test_step_after_synchronize_warns():
    model = make_net(seed=5)
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1),
        named_parameters=model.named_parameters())
    model(torch.ones(2, 6)).sum().backward()
    opt.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt.step()
    assert len(caught) == 1
    assert ("optimizer.step() called without optimizer.skip_synchronize()"
            in str(caught[0].message))
    # Inside skip_synchronize: no warning.
    opt.zero_grad()
    model(torch.ones(2, 6)).sum().backward()
    opt.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with opt.skip_synchronize():
            opt.step()
    assert not caught


def random_sparse(rows, seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(rows, 4, generator=g)
    t[t < 0.7] = 0
    return t.to_sparse()


@pytest.mark.parametrize("op", [hvd.Average, hvd.Sum])
def test_sparse_allreduce_equals_the_dense_allreduce(op):
    n, r = n_r()
    tensors = [random_sparse(rows, 100 * r + i)
               for i, rows in enumerate([9, 1, 30])]
    dense = [hvd.allreduce(t.to_dense(), op=op) for t in tensors]
    handles = [hvd.sparse_allreduce_async(t, name="api.sparse.%s.%d" %
                                          (op, i), op=op)
               for i, t in enumerate(tensors)]
    for h, d in zip(handles, dense):
        result = h()
        assert result.is_sparse
        assert torch.allclose(result.to_dense(), d, atol=1e-6)
    # A rank with no entries at all takes part too.
    empty = torch.zeros(5, 4).to_sparse() if r == 0 else random_sparse(5, r)
    out = hvd.synchronize(hvd.sparse_allreduce_async(empty, op=hvd.Sum))
    assert torch.allclose(out.to_dense(),
                          hvd.allreduce(empty.to_dense(), op=hvd.Sum))
    with pytest.raises(ValueError, match="Average or Sum"):
        hvd.sparse_allreduce_async(tensors[0], op=hvd.Max)


@pytest.mark.parametrize("sparse_as_dense", [False, True])
def test_optimizer_with_sparse_embedding_gradients(sparse_as_dense):
    n, r = n_r()
    torch.manual_seed(7)
    model = torch.nn.Embedding(10, 3, sparse=True)
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=1.0),
        named_parameters=model.named_parameters(),
        sparse_as_dense=sparse_as_dense)
    before = model.weight.detach().clone()
    rows = torch.tensor([[r % 10, (r + 3) % 10, 5]])
    opt.zero_grad()
    model(rows).sum().backward()
    opt.step()
    assert model.weight.grad.is_sparse
    # The average over ranks of each rank's row counts.
    counts = torch.zeros(10)
    for k in range(n):
        for i in (k % 10, (k + 3) % 10, 5):
            counts[i] += 1
    expected = before - (counts / n).unsqueeze(1)
    assert torch.allclose(model.weight.detach(), expected, atol=1e-6)


@pytest.mark.parametrize("shape", [(3, 4), (2, 4, 5)])
def test_sync_batch_norm_equals_batch_norm_on_the_whole_batch(shape):
    n, r = n_r()
    g = torch.Generator().manual_seed(11)
    whole = torch.randn((n * shape[0],) + shape[1:], generator=g) * 3 + 1
    rows = slice(r * shape[0], (r + 1) * shape[0])
    sync = hvd.SyncBatchNorm(4, momentum=0.3)
    plain = torch.nn.BatchNorm1d(4, momentum=0.3)
    with torch.no_grad():
        for m in (sync, plain):
            m.weight.copy_(torch.tensor([1.0, 2.0, 0.5, -1.0]))
            m.bias.copy_(torch.tensor([0.0, 1.0, -1.0, 2.0]))
    mine = whole[rows].clone().requires_grad_()
    full = whole.clone().requires_grad_()
    out = sync(mine)
    ref = plain(full)
    assert torch.allclose(out, ref[rows], atol=1e-5)
    assert torch.allclose(sync.running_mean, plain.running_mean, atol=1e-5)
    assert torch.allclose(sync.running_var, plain.running_var, atol=1e-5)
    # A loss over the whole batch: every rank's share of it.
    weights = torch.randn(ref.shape, generator=g)
    (out * weights[rows]).sum().backward()
    (ref * weights).sum().backward()
    assert torch.allclose(mine.grad, full.grad[rows], atol=1e-5)
    # Parameter gradients are per rank (their sum over ranks is the
    # whole batch's), as DistributedOptimizer expects.
    assert torch.allclose(hvd.allreduce(sync.weight.grad, op=hvd.Sum),
                          plain.weight.grad, atol=1e-4)
    assert torch.allclose(hvd.allreduce(sync.bias.grad, op=hvd.Sum),
                          plain.bias.grad, atol=1e-4)
    # Evaluation uses the running statistics, without communication.
    sync.eval()
    plain.eval()
    assert torch.allclose(sync(whole[rows]), plain(whole[rows]), atol=1e-5)


def test_timeline_started_and_stopped_while_running(tmp_path):
    _, r = n_r()
    # One path for every rank (rank 0 writes it).
    path = hvd.broadcast_object(str(tmp_path / "timeline.json"), root_rank=0)
    for mark_cycles in (True, False):
        hvd.start_timeline(path, mark_cycles=mark_cycles)
        hvd.allreduce(torch.ones(3), name="api.timeline.tensor")
        hvd.stop_timeline()
        hvd.barrier()
        if r == 0:
            with open(path) as f:
                text = f.read()
            events = json.loads(text)
            assert events and "api.timeline.tensor" in text
        hvd.barrier()
    hvd.stop_timeline()  # nothing running: fine
