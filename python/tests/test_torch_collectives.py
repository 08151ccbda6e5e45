"""hvdtune.torch's alltoall, reducescatter, grouped allgather and
reducescatter, barrier, join, Product and the one- and two-byte dtypes, on
every rank of `mpirun -np N python -m pytest`: results against what each
rank can compute on its own, gradients, and the errors."""

import time

import pytest
import torch

import hvdtune.torch as hvd


@pytest.fixture(scope="module", autouse=True)
def runtime():
    hvd.init()
    yield
    hvd.allreduce(torch.zeros(1), name="collectives.teardown")


def n_r():
    return hvd.size(), hvd.rank()


def rows_of(rank, dims, count, dtype=torch.float32):
    """`count` rows whose values say which rank sent them and where."""
    base = torch.arange(count, dtype=torch.float64) + 100 * rank
    return base.reshape((count,) + (1,) * len(dims)).expand(
        (count,) + tuple(dims)).to(dtype).contiguous()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int8,
                                   torch.int16, torch.bool])
def test_alltoall_equal_split(dtype):
    n, r = n_r()
    # Row j of rank k goes to rank j // 2 (two rows per rank).
    x = rows_of(r, (3,), 2 * n, torch.float64)
    out = hvd.alltoall(x.to(dtype))
    assert out.dtype == dtype and out.shape == (2 * n, 3)
    expected = torch.cat([rows_of(k, (3,), 2 * n, torch.float64)[2 * r:2 * r +
                                                                   2]
                          for k in range(n)])
    assert torch.equal(out, expected.to(dtype))


def test_alltoall_with_splits_returns_the_received_splits():
    n, r = n_r()
    # Rank r sends d + 1 rows to rank d (none to itself when r is odd).
    splits = [0 if (d == r and r % 2) else d + 1 for d in range(n)]
    x = rows_of(r, (2, 2), sum(splits))
    out, received = hvd.alltoall(x, torch.tensor(splits, dtype=torch.int32))
    expected_received = [0 if (r == k and k % 2) else r + 1 for k in range(n)]
    assert received.tolist() == expected_received
    assert received.dtype == torch.int32
    parts = []
    for k in range(n):
        ks = [0 if (d == k and k % 2) else d + 1 for d in range(n)]
        start = sum(ks[:r])
        parts.append(rows_of(k, (2, 2), sum(ks))[start:start + ks[r]])
    assert torch.equal(out, torch.cat(parts))
    h = hvd.alltoall_async(x, splits, name="collectives.a2a.async")
    out2, received2 = hvd.synchronize(h)
    assert torch.equal(out2, out) and torch.equal(received2, received)


def test_alltoall_gradient_returns_along_the_way_it_came():
    n, r = n_r()
    splits = torch.tensor([r + 1] * n, dtype=torch.int32)
    x = torch.ones((r + 1) * n, 2, requires_grad=True)
    out, received = hvd.alltoall(x, splits)
    # Upstream gradient: the sending rank's number + 1 on its rows.
    weights = torch.cat([torch.full((int(c), 2), float(k + 1))
                         for k, c in enumerate(received.tolist())])
    (out * weights).sum().backward()
    assert torch.equal(x.grad, torch.full_like(x, float(r + 1)))


def test_alltoall_errors():
    n, r = n_r()
    if n > 1:
        with pytest.raises(ValueError, match="divide evenly"):
            hvd.alltoall(torch.ones(n + 1))
    with pytest.raises(ValueError, match="int32 or int64"):
        hvd.alltoall(torch.ones(n), torch.ones(n))
    with pytest.raises(ValueError, match="add up to"):
        hvd.alltoall(torch.ones(n + 2), [1] * n)
    with pytest.raises(ValueError, match="one per rank"):
        hvd.alltoall(torch.ones(n + 1), [1] * (n + 1))
    if n > 1:
        with pytest.raises(hvd.HorovodInternalError):
            hvd.alltoall(torch.ones(2 * n, 3 + r), name="collectives.a2a.dims")


def my_rows(total, n, r):
    """Horovod's split of `total` rows: total // n each, one more for the
    first total % n ranks."""
    sizes = [total // n + (1 if k < total % n else 0) for k in range(n)]
    start = sum(sizes[:r])
    return slice(start, start + sizes[r])


@pytest.mark.parametrize("op", ["sum", "average", "min", "max", "product"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32,
                                   torch.int16])
def test_reducescatter_every_op_with_uneven_rows(op, dtype):
    n, r = n_r()
    total = 2 * n + 1
    def data(k):
        return (torch.arange(total * 3, dtype=torch.float64).reshape(total, 3)
                % 5 + k + 1).to(dtype)
    stack = torch.stack([data(k) for k in range(n)])
    full = {
        "sum": stack.sum(0),
        "average": stack.sum(0) / n if dtype.is_floating_point else
        torch.div(stack.sum(0), n, rounding_mode="trunc"),
        "min": stack.min(0).values,
        "max": stack.max(0).values,
        "product": stack.prod(0),
    }[op].to(dtype)
    out = hvd.reducescatter(data(r), op=op, name="collectives.rs.%s.%s" %
                            (op, dtype))
    assert out.dtype == dtype
    assert torch.allclose(out.double(), full[my_rows(total, n, r)].double())


def test_reducescatter_scaling_and_async():
    n, r = n_r()
    x = torch.full((2 * n, 2), float(r + 1))
    out = hvd.synchronize(
        hvd.reducescatter_async(x, op=hvd.Sum, prescale_factor=0.5,
                                postscale_factor=3.0))
    assert torch.allclose(out, torch.full((2, 2), 1.5 * n * (n + 1) / 2))
    ints = torch.full((n, 1), 7 * (r + 1), dtype=torch.int32)
    scaled = hvd.reducescatter(ints, op=hvd.Sum, prescale_factor=0.5)
    # Each rank's contribution is scaled in float64 and truncated first.
    assert scaled.item() == sum(int(3.5 * (k + 1)) for k in range(n))


def test_reducescatter_gradients_follow_horovod():
    n, r = n_r()
    for op, factor in ((hvd.Sum, n), (hvd.Average, 1)):
        x = torch.ones(3 * n, 2, requires_grad=True)
        y = hvd.reducescatter(x, op=op)
        (y * (r + 1)).sum().backward()
        # Horovod's gradient: the allgather of the upstream gradients, times
        # size for Sum.
        expected = torch.cat([torch.full((3, 2), float(k + 1) * factor)
                              for k in range(n)])
        assert torch.equal(x.grad, expected)


def test_grouped_reducescatter_and_its_gradient():
    n, r = n_r()
    a = torch.full((n, 2), float(r), requires_grad=True)
    b = torch.full((2 * n + 1,), 1.0, requires_grad=True)
    ya, yb = hvd.grouped_reducescatter([a, b], op=hvd.Sum)
    assert torch.equal(ya.detach(), torch.full((1, 2), float(sum(range(n)))))
    rows = my_rows(2 * n + 1, n, r)
    assert yb.shape[0] == rows.stop - rows.start
    assert torch.equal(yb.detach(), torch.full_like(yb, float(n)))
    (ya.sum() + yb.sum()).backward()
    assert torch.equal(a.grad, torch.full_like(a, float(n)))
    assert torch.equal(b.grad, torch.full_like(b, float(n)))
    outs = hvd.synchronize(
        hvd.grouped_reducescatter_async([a.detach(), b.detach()],
                                        op=hvd.Average))
    assert torch.allclose(outs[0], torch.full((1, 2), sum(range(n)) / n))


def test_reducescatter_errors():
    n, r = n_r()
    with pytest.raises(ValueError, match="scalar"):
        hvd.reducescatter(torch.tensor(1.0))
    with pytest.raises(ValueError, match="Adasum"):
        hvd.reducescatter(torch.ones(n), op=hvd.Adasum)
    if n > 1:
        with pytest.raises(hvd.HorovodInternalError):
            hvd.reducescatter(torch.ones(n, 2 + r),
                              name="collectives.rs.mismatch")


def test_grouped_allgather_and_its_gradient():
    n, r = n_r()
    a = torch.full((r + 1, 2), float(r), requires_grad=True)
    b = torch.full((1,), float(r), dtype=torch.float64, requires_grad=True)
    ga, gb = hvd.grouped_allgather([a, b])
    assert torch.equal(ga.detach(), torch.cat(
        [torch.full((k + 1, 2), float(k)) for k in range(n)]))
    assert torch.equal(gb.detach(), torch.arange(n, dtype=torch.float64))
    (ga.sum() * (r + 1) + gb.sum()).backward()
    mean = sum(k + 1 for k in range(n)) / n
    assert torch.allclose(a.grad, torch.full_like(a, mean))
    assert torch.allclose(b.grad, torch.ones_like(b))


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.bool])
def test_small_dtypes_move_and_reduce(dtype):
    n, r = n_r()
    x = (torch.arange(6) % 2 == r % 2) if dtype == torch.bool else torch.full(
        (6,), r - 1, dtype=dtype)
    assert torch.equal(hvd.broadcast(x, 0), (torch.arange(6) % 2 == 0)
                       if dtype == torch.bool else torch.full((6,), -1,
                                                              dtype=dtype))
    g = hvd.allgather(x.reshape(2, 3))
    assert g.dtype == dtype and g.shape == (2 * n, 3)
    if dtype == torch.bool:
        with pytest.raises(ValueError, match="bool"):
            hvd.allreduce(x, op=hvd.Sum)
        return
    assert torch.equal(hvd.allreduce(x, op=hvd.Sum),
                       torch.full((6,), sum(k - 1 for k in range(n)),
                                  dtype=dtype))
    assert torch.equal(hvd.allreduce(x, op=hvd.Min),
                       torch.full((6,), -1, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.int32, torch.float32,
                                   torch.float64])
def test_product(dtype):
    n, r = n_r()
    x = torch.tensor([r + 1, -1, 2], dtype=torch.float64).to(dtype)
    expected = torch.tensor([
        torch.arange(1, n + 1).prod().item(), (-1) ** n, 2 ** n
    ], dtype=torch.float64).to(dtype)
    assert torch.equal(hvd.allreduce(x, op=hvd.Product), expected)
    y = x.clone()
    hvd.allreduce_(y, op=hvd.Product)
    assert torch.equal(y, expected)


def test_barrier_with_collectives_in_flight():
    n, r = n_r()
    h = hvd.allreduce_async(torch.ones(3), op=hvd.Sum,
                            name="collectives.barrier.pending")
    start = time.monotonic()
    if r == 0:
        time.sleep(0.3)
    hvd.barrier()
    assert time.monotonic() - start >= 0.25 or n == 1
    assert torch.equal(hvd.synchronize(h), torch.full((3,), float(n)))


def test_join_neutral_contributions_and_last_rank():
    n, r = n_r()
    for first in range(n):
        if r == first:
            last = hvd.join()
        else:
            out = hvd.allreduce(torch.full((4,), float(r + 1)), op=hvd.Sum,
                                name="collectives.join.sum")
            # The joined rank adds zero.
            assert torch.equal(
                out, torch.full((4,), float(sum(k + 1 for k in range(n)) -
                                            (first + 1))))
            mx = hvd.allreduce(torch.full((2,), -5.0 - r), op=hvd.Max,
                               name="collectives.join.max")
            others = [-5.0 - k for k in range(n) if k != first]
            assert torch.equal(mx, torch.full((2,), max(others)))
            last = hvd.join()
        assert last != first or n == 1
        assert hvd.allgather_object(last) == [last] * n


def test_join_fails_the_collectives_that_cannot_go_on():
    n, r = n_r()
    if n == 1:
        return
    if r == 0:
        hvd.join()
    else:
        with pytest.raises(hvd.HorovodInternalError, match="join"):
            hvd.allgather(torch.ones(2), name="collectives.join.gather")
        hvd.join()


def test_process_sets_run_their_own_collectives():
    n, r = n_r()
    evens = hvd.add_process_set([k for k in range(n) if k % 2 == 0])
    odds = hvd.add_process_set(hvd.ProcessSet(
        [k for k in range(n) if k % 2 == 1])) if n > 1 else None
    mine = evens if r % 2 == 0 else odds
    other = odds if r % 2 == 0 else evens
    members = mine.ranks
    assert mine.included() and mine.size() == len(members)
    assert mine.rank() == members.index(r)
    x = torch.full((3,), float(r + 1), requires_grad=True)
    y = hvd.allreduce(x, op=hvd.Sum, process_set=mine)
    assert torch.equal(y.detach(),
                       torch.full((3,), float(sum(k + 1 for k in members))))
    y.sum().backward()
    assert torch.equal(x.grad, torch.full((3,), float(len(members))))
    g = hvd.allgather(torch.full((1, 2), float(r)), process_set=mine)
    assert g[:, 0].tolist() == [float(k) for k in members]
    root = members[-1]
    b = hvd.broadcast(torch.full((2,), float(r)), root, process_set=mine)
    assert torch.equal(b, torch.full((2,), float(root)))
    rs = hvd.reducescatter(torch.ones(2 * len(members), 1), op=hvd.Sum,
                           process_set=mine)
    assert torch.equal(rs, torch.full((2, 1), float(len(members))))
    a2a = hvd.alltoall(torch.full((len(members),), float(r)),
                       process_set=mine)
    assert a2a.tolist() == [float(k) for k in members]
    assert hvd.allgather_object(r, process_set=mine) == members
    assert hvd.broadcast_object({"from": root}, root_rank=root,
                                process_set=mine) == {"from": root}
    hvd.barrier(process_set=mine)
    if other is not None:
        with pytest.raises(ValueError, match="not in"):
            hvd.allreduce(torch.ones(1), process_set=other)
        with pytest.raises(ValueError, match="not in"):
            hvd.broadcast(torch.ones(1), other.ranks[0], process_set=mine)
    # The job's own collectives go on beside the sets'.
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == n
    assert hvd.remove_process_set(evens)
    if odds is not None:
        assert hvd.remove_process_set(odds)
    assert not hvd.remove_process_set(hvd.global_process_set)
    with pytest.raises(ValueError, match="removed"):
        hvd.allreduce(torch.ones(1), process_set=evens)


def test_distributed_optimizer_on_a_process_set():
    n, r = n_r()
    if n < 2:
        return
    pair = hvd.add_process_set([0, 1])
    model = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=1.0),
        named_parameters=model.named_parameters(), process_set=pair)
    model(torch.full((1, 2), float(r + 1))).sum().backward()
    opt.step()
    if r in (0, 1):
        # The average of the two ranks' gradients (1 and 2 per weight).
        assert torch.allclose(model.weight, torch.full((1, 2), -0.5))
    else:
        # Outside the set: it steps on its own gradients.
        assert torch.allclose(model.weight, torch.full((1, 2), -float(r)))
    hvd.remove_process_set(pair)


def test_unnamed_collectives_line_up_again_after_join():
    n, r = n_r()
    if n == 1:
        return
    for first in range(n):
        if r != first:
            # The others issue an unnamed collective the early rank never
            # does (it fails: a rank has joined)...
            with pytest.raises(hvd.HorovodInternalError):
                hvd.allgather(torch.ones(2))
        hvd.join()
        # ...and after join every rank's next unnamed one has the same name.
        out = hvd.allgather(torch.full((1,), float(r)))
        assert out.tolist() == [float(k) for k in range(n)]
