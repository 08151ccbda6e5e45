"""hvdtune.torch on CUDA tensors, under `mpirun -np N python -m pytest`:
every collective exact against what each rank computes on its own, on the
route the runtime gives CUDA tensors (NCCL when it has its NCCL backend,
staged through host memory otherwise), ordered against torch's current
stream; and both routes' bookkeeping with CPU tensors forced along them, so
that it is tested where there is no GPU. The CUDA cases skip, saying why,
without a GPU."""

import pytest
import torch

import hvdtune.torch as hvd
from hvdtune.torch import _common


@pytest.fixture(scope="module", autouse=True)
def runtime():
    hvd.init()
    yield
    hvd.allreduce(torch.zeros(1), name="cuda.teardown")


def n_r():
    return hvd.size(), hvd.rank()


def cuda_device():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to torch %s (built for CUDA %s)" %
                    (torch.__version__, torch.version.cuda))
    torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
    return torch.device("cuda", torch.cuda.current_device())


@pytest.fixture(params=["staged-cpu", "direct-cpu", "cuda"])
def device(request, monkeypatch):
    """A CUDA device, or the CPU with CPU tensors taking the route of a CUDA
    tensor: staged (a host copy in, the result copied back) as without
    NCCL, or direct (their own memory) as with it."""
    if request.param == "cuda":
        return cuda_device()
    route = "staged" if request.param == "staged-cpu" else "nccl"
    monkeypatch.setattr(_common, "_force_route", route)
    return torch.device("cpu")


def values(r, numel, dtype, shape=None):
    """Rank r's input: small integers, so every sum and product is exact."""
    x = (torch.arange(numel, dtype=torch.int64) % 5 + r + 1)
    return x.reshape(shape or (numel,)).to(dtype)


def reduce_ref(n, numel, dtype, op, shape=None):
    xs = torch.stack([values(k, numel, torch.float64, shape)
                      for k in range(n)])
    if op == hvd.Sum:
        out = xs.sum(0)
    elif op == hvd.Average:
        out = xs.mean(0)
    elif op == hvd.Min:
        out = xs.min(0).values
    elif op == hvd.Max:
        out = xs.max(0).values
    else:
        out = xs.prod(0)
    return out.to(dtype)


def check(out, expected, device):
    assert out.device == device, (out.device, device)
    assert out.dtype == expected.dtype
    assert torch.equal(out.cpu(), expected), (out.cpu(), expected)


# -- routes -----------------------------------------------------------------


def test_cuda_route_is_nccl_exactly_when_the_runtime_has_it():
    device = cuda_device()
    route = _common._route(torch.ones(2, device=device),
                           hvd.global_process_set)
    assert route == ("nccl" if hvd.has_nccl() else "staged")
    # int16 and the collectives NCCL does not run here are staged.
    assert _common._route(torch.ones(2, dtype=torch.int16, device=device),
                          hvd.global_process_set) == "staged"
    assert _common._route(torch.ones(2, device=device),
                          hvd.global_process_set, nccl_ok=False) == "staged"
    if hvd.cuda_built() and hvd.local_size() <= torch.cuda.device_count():
        assert hvd.has_nccl(), hvd.nccl_unavailable()
    if not hvd.has_nccl():
        assert hvd.nccl_unavailable()


def test_forced_routes_of_cpu_tensors(monkeypatch):
    ps = hvd.global_process_set
    assert _common._route(torch.ones(2), ps) == "host"
    monkeypatch.setattr(_common, "_force_route", "staged")
    assert _common._route(torch.ones(2), ps) == "staged"
    monkeypatch.setattr(_common, "_force_route", "nccl")
    assert _common._route(torch.ones(2), ps) == "nccl"
    # What NCCL does not run here is staged.
    assert _common._route(torch.ones(2, dtype=torch.int16), ps) == "staged"
    assert _common._route(torch.ones(2), ps, nccl_ok=False) == "staged"


# -- allreduce ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64,
                                   torch.float16, torch.bfloat16, torch.int32,
                                   torch.int64, torch.uint8, torch.int16])
@pytest.mark.parametrize("numel", [1, 17, 4099])
def test_allreduce_sum_every_dtype(device, dtype, numel):
    n, r = n_r()
    x = values(r, numel, dtype).to(device)
    check(hvd.allreduce(x, op=hvd.Sum), reduce_ref(n, numel, dtype, hvd.Sum),
          device)
    # The input is untouched by the out-of-place call.
    check(x, values(r, numel, dtype), device)


@pytest.mark.parametrize("op", [hvd.Average, hvd.Min, hvd.Max, hvd.Product])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_allreduce_ops(device, op, dtype):
    n, r = n_r()
    # An integer average truncates toward zero, as .to(int32) does.
    x = values(r, 33, dtype, (3, 11)).to(device)
    check(hvd.allreduce(x, op=op), reduce_ref(n, 33, dtype, op, (3, 11)),
          device)


def test_allreduce_in_place_with_scale_factors(device):
    n, r = n_r()
    x = values(r, 100, torch.float32, (10, 10)).to(device)
    out = hvd.allreduce_(x, op=hvd.Sum, prescale_factor=2.0,
                         postscale_factor=0.5)
    assert out.data_ptr() == x.data_ptr()  # the caller's tensor holds it
    check(x, reduce_ref(n, 100, torch.float32, hvd.Sum, (10, 10)), device)
    # Non-contiguous: reduced through a contiguous copy, written back.
    y = values(r, 100, torch.float32, (10, 10)).to(device).t()
    hvd.allreduce_(y, op=hvd.Sum)
    check(y, reduce_ref(n, 100, torch.float32, hvd.Sum, (10, 10)).t(),
          device)


def test_allreduce_async_and_average(device):
    n, r = n_r()
    x = values(r, 64, torch.float32).to(device)
    h = hvd.allreduce_async(x, name="cuda.avg")
    check(hvd.synchronize(h), reduce_ref(n, 64, torch.float32, hvd.Average),
          device)


@pytest.mark.parametrize("inplace", [False, True])
def test_grouped_allreduce(device, inplace):
    n, r = n_r()
    shapes = [(5,), (2, 3), (7, 1, 2)]
    xs = [values(r, torch.Size(s).numel(), torch.float32, s).to(device)
          for s in shapes]
    if inplace:
        out = hvd.grouped_allreduce_(xs, op=hvd.Sum)
        assert [o.data_ptr() for o in out] == [x.data_ptr() for x in xs]
    else:
        out = hvd.grouped_allreduce(xs, op=hvd.Sum)
    for o, s in zip(out, shapes):
        check(o, reduce_ref(n, torch.Size(s).numel(), torch.float32, hvd.Sum,
                            s), device)


def test_allreduce_gradient(device):
    n, r = n_r()
    x = values(r, 6, torch.float32).to(device).requires_grad_()
    y = hvd.allreduce(x, op=hvd.Sum)
    (y * 2).sum().backward()
    check(x.grad, torch.full((6,), 2.0 * n), device)


# -- broadcast, allgather -------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8])
def test_broadcast_from_every_root(device, dtype):
    n, r = n_r()
    for root in range(n):
        x = values(r, 21, dtype, (3, 7)).to(device)
        check(hvd.broadcast(x, root, name="cuda.bc.%d" % root),
              values(root, 21, dtype, (3, 7)), device)
        check(x, values(r, 21, dtype, (3, 7)), device)
        hvd.broadcast_(x, root, name="cuda.bc_.%d" % root)
        check(x, values(root, 21, dtype, (3, 7)), device)


@pytest.mark.parametrize("equal", [True, False])
def test_allgather(device, equal):
    n, r = n_r()
    rows = 3 if equal else r + 1
    x = values(r, rows * 4, torch.float32, (rows, 4)).to(device)
    expected = torch.cat([
        values(k, (3 if equal else k + 1) * 4, torch.float32,
               (3 if equal else k + 1, 4)) for k in range(n)
    ])
    check(hvd.allgather(x), expected, device)


def test_grouped_allgather(device):
    n, r = n_r()
    xs = [values(r, 2 * (r + 1), torch.int64, (r + 1, 2)).to(device),
          values(r, 3, torch.float32, (1, 3)).to(device)]
    out = hvd.grouped_allgather(xs)
    check(out[0], torch.cat([values(k, 2 * (k + 1), torch.int64, (k + 1, 2))
                             for k in range(n)]), device)
    check(out[1], torch.cat([values(k, 3, torch.float32, (1, 3))
                             for k in range(n)]), device)


# -- reducescatter, alltoall ------------------------------------------------------


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
def test_reducescatter(device, op):
    n, r = n_r()
    rows = 2 * n + 1
    x = values(r, rows * 3, torch.float32, (rows, 3)).to(device)
    full = reduce_ref(n, rows * 3, torch.float32, op, (rows, 3))
    share = [rows // n + (1 if k < rows % n else 0) for k in range(n)]
    start = sum(share[:r])
    check(hvd.reducescatter(x, op=op), full[start:start + share[r]], device)
    out = hvd.grouped_reducescatter([x, x * 2], op=op)
    check(out[0], full[start:start + share[r]], device)
    check(out[1], full[start:start + share[r]] * 2, device)


def test_alltoall(device):
    n, r = n_r()
    x = values(r, 2 * n * 3, torch.float32, (2 * n, 3)).to(device)
    expected = torch.cat([
        values(k, 2 * n * 3, torch.float32, (2 * n, 3))[2 * r:2 * r + 2]
        for k in range(n)
    ])
    check(hvd.alltoall(x), expected, device)
    splits = torch.tensor([d + 1 for d in range(n)], dtype=torch.int32)
    y = values(r, sum(range(1, n + 1)) * 2, torch.float32,
               (sum(range(1, n + 1)), 2)).to(device)
    out, received = hvd.alltoall(y, splits)
    assert received.tolist() == [r + 1] * n
    parts = []
    for k in range(n):
        rows = values(k, sum(range(1, n + 1)) * 2, torch.float32,
                      (sum(range(1, n + 1)), 2))
        start = sum(range(1, r + 1))
        parts.append(rows[start:start + r + 1])
    check(out, torch.cat(parts), device)


# -- sparse, process sets, the optimizer -------------------------------------------


def test_sparse_allreduce(device):
    n, r = n_r()
    sp = torch.sparse_coo_tensor(torch.tensor([[r, n]]),
                                 torch.tensor([r + 1.0, 1.0]), (n + 1,))
    out = hvd.synchronize(
        hvd.sparse_allreduce_async(sp.to(device), name="cuda.sparse",
                                   op=hvd.Sum))
    expected = torch.tensor([k + 1.0 for k in range(n)] + [float(n)])
    check(out.to_dense(), expected, device)


def test_process_set(device):
    """A set of all ranks but the last (its own runtime; the global set at
    one rank)."""
    n, r = n_r()
    members = list(range(max(1, n - 1)))
    ps = hvd.add_process_set(members)
    try:
        if r in members:
            x = values(r, 9, torch.float32).to(device)
            check(hvd.allreduce(x, op=hvd.Sum, process_set=ps),
                  reduce_ref(len(members), 9, torch.float32, hvd.Sum), device)
    finally:
        if ps is not hvd.global_process_set:
            hvd.remove_process_set(ps)


def test_distributed_optimizer_averages_gradients(device):
    n, r = n_r()

    def model_and_grads(k):
        torch.manual_seed(7)
        m = torch.nn.Linear(4, 2)
        m(torch.full((3, 4), float(k + 1))).pow(2).sum().backward()
        return m

    refs = [model_and_grads(k) for k in range(n)]
    expected = [torch.stack([dict(m.named_parameters())[name].grad
                             for m in refs]).mean(0)
                for name, _ in refs[0].named_parameters()]
    torch.manual_seed(7)
    model = torch.nn.Linear(4, 2).to(device)
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.0),
        named_parameters=model.named_parameters())
    model(torch.full((3, 4), float(r + 1), device=device)).pow(2).sum() \
        .backward()
    opt.step()
    for (name, p), e in zip(model.named_parameters(), expected):
        assert p.grad.device == device
        torch.testing.assert_close(p.grad.cpu(), e, rtol=1e-5, atol=1e-5,
                                   msg=name)


# -- ordering against torch's streams -------------------------------------------------


def test_result_follows_work_queued_on_the_current_stream():
    """The input is still being computed by torch when the collective is
    called: the NCCL collective must wait for it (an event on the current
    stream), and the result must be complete when synchronize returns."""
    device = cuda_device()
    n, r = n_r()
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        x = torch.zeros(1 << 22, device=device)
        for _ in range(50):  # long enough to still run at the call
            x.add_(float(r + 1) / 50)
        x.round_()
        out = hvd.allreduce(x, op=hvd.Sum, name="cuda.ordering")
        total = out.sum()  # queued on the side stream right after
    torch.cuda.synchronize(device)
    expected = float(sum(k + 1 for k in range(n)))
    assert torch.all(out == expected).item()
    assert total.item() == expected * (1 << 22)
