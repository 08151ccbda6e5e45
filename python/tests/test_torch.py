"""hvdtune.torch on every rank of `mpirun -np N python -m pytest
test_torch.py`: the collectives on tensors, and DistributedOptimizer against
single-process training on the concatenated batch and against PyTorch's
DistributedDataParallel (gloo) on the same data."""

import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

import hvdtune.torch as hvd

STEPS = 5
PER_RANK = 8


@pytest.fixture(scope="module", autouse=True)
def runtime():
    hvd.init()
    torch.manual_seed(0)
    yield
    # No rank shuts the job down (at exit) while another is still testing.
    hvd.allreduce(torch.zeros(1), name="teardown")


def make_model(seed=1):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.Tanh(),
                               torch.nn.Linear(16, 3))


def global_batch(step, ranks):
    """The whole step's batch; rank r trains rows [r*PER_RANK, (r+1)*PER_RANK)."""
    g = torch.Generator().manual_seed(100 + step)
    x = torch.randn(ranks * PER_RANK, 10, generator=g)
    y = torch.randint(0, 3, (ranks * PER_RANK,), generator=g)
    return x, y


def local_batch(step):
    x, y = global_batch(step, hvd.size())
    rows = slice(hvd.rank() * PER_RANK, (hvd.rank() + 1) * PER_RANK)
    return x[rows], y[rows]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def flat_params(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def train_hvd(passes=1, **kwargs):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt = hvd.DistributedOptimizer(opt,
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=passes, **kwargs)
    for step in range(STEPS):
        x, y = local_batch(step)
        opt.zero_grad()
        for chunk_x, chunk_y in zip(x.chunk(passes), y.chunk(passes)):
            # Horovod's convention: the loss of each pass scaled by 1/passes.
            loss = F.cross_entropy(model(chunk_x), chunk_y) / passes
            loss.backward()
        opt.step()
    return model


def train_plain(model, batch):
    """STEPS of plain SGD (the optimizer every test uses) on batch(step)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(STEPS):
        x, y = batch(step)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return model


def train_single_process():
    return train_plain(make_model(),
                       lambda step: global_batch(step, hvd.size()))


def assert_same_on_every_rank(model):
    params = flat_params(model)
    gathered = hvd.allgather(params.unsqueeze(0))
    for r in range(hvd.size()):
        assert torch.equal(gathered[r], params), "rank %d differs" % r


def test_collectives_on_tensors():
    n, r = hvd.size(), hvd.rank()
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3) + r
    expected_sum = sum(
        torch.arange(6, dtype=torch.float32).reshape(2, 3) + k
        for k in range(n))
    assert torch.equal(hvd.allreduce(t, op=hvd.Sum), expected_sum)
    assert torch.allclose(hvd.allreduce(t), expected_sum / n)
    assert torch.allclose(hvd.allreduce(t, average=True), expected_sum / n)
    assert torch.equal(hvd.allreduce(t, op=hvd.Max), expected_sum * 0 +
                       torch.arange(6.).reshape(2, 3) + n - 1)
    assert torch.allclose(
        hvd.allreduce(t, op=hvd.Sum, prescale_factor=2.0,
                      postscale_factor=0.5), expected_sum)
    c = t.clone()
    hvd.allreduce_(c, op=hvd.Sum)
    assert torch.equal(c, expected_sum)
    # In place on a non-contiguous view: reduced and written back.
    base = (torch.arange(6, dtype=torch.float64).reshape(3, 2) + r)
    view = base.t()
    hvd.allreduce_(view, op=hvd.Sum)
    assert torch.equal(base, sum(
        torch.arange(6, dtype=torch.float64).reshape(3, 2) + k
        for k in range(n)))
    h = hvd.allreduce_async(t, op=hvd.Sum, name="torch.async")
    assert torch.equal(hvd.synchronize(h), expected_sum)
    assert hvd.poll(h)
    outs = hvd.grouped_allreduce([t, t.double()], op=hvd.Sum)
    assert torch.equal(outs[0], expected_sum)
    assert torch.equal(outs[1], expected_sum.double())
    for dtype in (torch.float16, torch.bfloat16, torch.int64, torch.uint8):
        x = torch.full((5,), r + 1).to(dtype)
        assert torch.equal(hvd.allreduce(x, op=hvd.Sum),
                           torch.full((5,), n * (n + 1) // 2).to(dtype))
        g = hvd.allgather(torch.full((r + 1, 2), r).to(dtype))
        assert g.dtype == dtype and g.shape == (n * (n + 1) // 2, 2)
        assert torch.equal(
            g,
            torch.cat([torch.full((k + 1, 2), k)
                       for k in range(n)]).to(dtype))
    b = torch.full((3,), float(r))
    assert torch.equal(hvd.broadcast(b, 1), torch.full((3,), 1.0))
    assert torch.equal(b, torch.full((3,), float(r)))
    hvd.broadcast_(b, 1)
    assert torch.equal(b, torch.full((3,), 1.0))
    assert hvd.broadcast_object({"rank": r, "t": torch.ones(2) * r},
                                root_rank=1)["rank"] == 1
    assert hvd.allgather_object(r * 10) == [k * 10 for k in range(n)]


def test_allreduce_is_differentiable():
    x = torch.ones(4, requires_grad=True)
    y = hvd.allreduce(x * (hvd.rank() + 1), op=hvd.Sum)
    y.sum().backward()
    # d/dx of sum over ranks of (r+1)x, the upstream gradient summed too.
    assert torch.allclose(x.grad, torch.full((4,), float(hvd.size()) *
                                             (hvd.rank() + 1)))


def test_unsupported_ops_are_refused():
    with pytest.raises(hvd.HvdtuneError, match="Adasum"):
        hvd.DistributedOptimizer(torch.optim.SGD(make_model().parameters(),
                                                 lr=0.1), op=hvd.Adasum)
    with pytest.raises(hvd.HvdtuneError, match="not supported"):
        hvd.allreduce(torch.ones(2), op="median")
    with pytest.raises(hvd.HvdtuneError, match="device"):
        hvd.allreduce(torch.ones(2, device="meta"))


def test_distributed_optimizer_equals_single_process_on_the_whole_batch():
    model = train_hvd()
    assert_same_on_every_rank(model)
    reference = train_single_process()
    assert torch.allclose(flat_params(model), flat_params(reference),
                          atol=1e-5, rtol=1e-5)
    # The comparison would catch a missing reduction.
    local = train_plain(make_model(), local_batch)
    assert not torch.allclose(flat_params(local), flat_params(reference),
                              atol=1e-4)


def test_backward_passes_per_step_2_equals_the_doubled_batch():
    model = train_hvd(passes=2)
    assert_same_on_every_rank(model)
    assert torch.allclose(flat_params(model),
                          flat_params(train_single_process()), atol=1e-5,
                          rtol=1e-5)


def test_too_many_backward_passes_are_refused():
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    x, y = local_batch(0)
    F.cross_entropy(model(x), y).backward()
    with pytest.raises(AssertionError, match="zero_grad"):
        opt.zero_grad()
    with pytest.raises(AssertionError, match="backward_passes_per_step"):
        F.cross_entropy(model(x), y).backward()
    opt.synchronize()
    with opt.skip_synchronize():
        opt.step()


@pytest.mark.parametrize("kwargs", [
    {"num_groups": 2},
    {"compression": hvd.Compression.fp16},
    {"op": hvd.Sum, "gradient_predivide_factor": 1.0},
    {"gradient_predivide_factor": 2.0},
],
                         ids=["num_groups", "fp16", "sum", "predivide"])
def test_distributed_optimizer_options(kwargs):
    model = train_hvd(**kwargs)
    assert_same_on_every_rank(model)
    reference = train_single_process()
    if kwargs.get("op") == hvd.Sum:
        # Sum is size x the average gradient: a different trajectory.
        assert not torch.allclose(flat_params(model), flat_params(reference),
                                  atol=1e-3)
        return
    tol = 2e-3 if "compression" in kwargs else 1e-5
    assert torch.allclose(flat_params(model), flat_params(reference),
                          atol=tol, rtol=tol)


def test_distributed_optimizer_equals_ddp():
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(hvd.broadcast_object(free_port()))
    dist.init_process_group("gloo", rank=hvd.rank(), world_size=hvd.size())
    try:
        ddp = train_plain(
            torch.nn.parallel.DistributedDataParallel(make_model()),
            local_batch)
    finally:
        dist.destroy_process_group()
    assert torch.allclose(flat_params(train_hvd()), flat_params(ddp.module),
                          atol=1e-5, rtol=1e-5)


def test_broadcast_parameters_and_optimizer_state():
    model = make_model(seed=10 + hvd.rank())
    opt = torch.optim.Adam(model.parameters(), lr=0.01 * (hvd.rank() + 1))
    # A rank-dependent number of local steps: different Adam states.
    for step in range(hvd.rank() + 1):
        x, y = local_batch(step)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert_same_on_every_rank(model)
    state = opt.state_dict()
    assert state["param_groups"][0]["lr"] == pytest.approx(0.01)
    steps = [float(s["step"]) for s in state["state"].values()]
    assert steps and all(s == 1.0 for s in steps)
    exp_avg = torch.cat([s["exp_avg"].reshape(-1)
                         for s in state["state"].values()])
    gathered = hvd.allgather(exp_avg.unsqueeze(0))
    assert all(torch.equal(gathered[r], exp_avg) for r in range(hvd.size()))
