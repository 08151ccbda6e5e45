"""hvdtune's numpy-level binding against numpy references, on every rank of
`mpirun -np N python -m pytest test_binding.py` (N >= 2). Every rank runs the
same tests in the same order; each rank computes the reference from the
inputs it knows every rank used."""

import os
import threading
import time

import numpy as np
import pytest
import torch

import hvdtune

DTYPES = [np.uint8, np.int32, np.int64, np.float16, np.float32, np.float64]
OPS = [hvdtune.Sum, hvdtune.Average, hvdtune.Min, hvdtune.Max]


def barrier(name):
    hvdtune.allreduce(np.zeros(1, np.float32), name=name)


@pytest.fixture(scope="module", autouse=True)
def runtime():
    hvdtune.init()
    yield
    # No rank shuts the job down (at exit) while another is still testing.
    barrier("teardown")


def rank_input(rank, dtype, shape, salt=0):
    """Small values, so every reduction is exact in every dtype."""
    n = int(np.prod(shape))
    values = (np.arange(n) * 3 + rank * 5 + salt) % 11 + rank
    return values.astype(dtype).reshape(shape)


def reference(op, dtype, shape, salt=0):
    inputs = [rank_input(r, dtype, shape, salt) for r in range(hvdtune.size())]
    stack = np.stack([x.astype(np.float64) for x in inputs])
    if op == hvdtune.Min:
        out = stack.min(axis=0)
    elif op == hvdtune.Max:
        out = stack.max(axis=0)
    else:
        out = stack.sum(axis=0)
        if op == hvdtune.Average:
            out = out / hvdtune.size()
            if np.issubdtype(dtype, np.integer):
                out = np.trunc(out)
    if dtype == np.uint8:
        out = np.mod(out, 256)
    return out.astype(dtype)


def test_world():
    assert hvdtune.is_initialized()
    assert hvdtune.size() == int(os.environ["OMPI_COMM_WORLD_SIZE"])
    assert hvdtune.rank() == int(os.environ["OMPI_COMM_WORLD_RANK"])
    assert hvdtune.local_rank() == int(
        os.environ["OMPI_COMM_WORLD_LOCAL_RANK"])
    assert hvdtune.local_size() == int(
        os.environ["OMPI_COMM_WORLD_LOCAL_SIZE"])
    assert hvdtune.size() >= 2, "run under mpirun -np 2 or more"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", OPS)
def test_allreduce_matches_numpy(dtype, op):
    shape = (3, 17)
    x = rank_input(hvdtune.rank(), dtype, shape)
    out = hvdtune.allreduce(x, op=op, name="ar.%s.%s" % (op, x.dtype))
    assert out.dtype == x.dtype and out.shape == shape
    np.testing.assert_array_equal(out, reference(op, dtype, shape))
    # The input is untouched.
    np.testing.assert_array_equal(x, rank_input(hvdtune.rank(), dtype, shape))


@pytest.mark.parametrize("count", [0, 1, 7, 1000003])
def test_allreduce_sizes(count):
    x = rank_input(hvdtune.rank(), np.float32, (count,))
    out = hvdtune.allreduce(x, op=hvdtune.Sum, name="sizes.%d" % count)
    np.testing.assert_array_equal(out, reference(hvdtune.Sum, np.float32,
                                                 (count,)))


def test_allreduce_in_place_writes_the_callers_memory():
    x = rank_input(hvdtune.rank(), np.float64, (5, 5))
    address = x.__array_interface__["data"][0]
    out = hvdtune.allreduce(x, op=hvdtune.Sum, name="inplace", output=x)
    assert out is x
    assert x.__array_interface__["data"][0] == address
    np.testing.assert_array_equal(x, reference(hvdtune.Sum, np.float64,
                                               (5, 5)))


def test_async_poll_and_synchronize_many():
    handles = []
    for i in range(50):
        x = rank_input(hvdtune.rank(), np.float32, (i + 1,), salt=i)
        handles.append((i, hvdtune.allreduce_async(x, hvdtune.Sum,
                                                   "many.%d" % i)))
    deadline = time.time() + 30
    while not all(hvdtune.poll(h) for _, h in handles):
        assert time.time() < deadline, "collectives did not finish"
        time.sleep(0.001)
    for i, h in handles:
        np.testing.assert_array_equal(
            hvdtune.synchronize(h),
            reference(hvdtune.Sum, np.float32, (i + 1,), salt=i))


def test_different_enqueue_order_per_rank():
    names = ["order.%d" % i for i in range(10)]
    order = names if hvdtune.rank() % 2 == 0 else list(reversed(names))
    handles = {
        n: hvdtune.allreduce_async(
            rank_input(hvdtune.rank(), np.int64, (4,), salt=len(n)),
            hvdtune.Sum, n) for n in order
    }
    for n in names:
        np.testing.assert_array_equal(
            hvdtune.synchronize(handles[n]),
            reference(hvdtune.Sum, np.int64, (4,), salt=len(n)))


def test_grouped_allreduce():
    shapes = [(3,), (2, 2), (100,)]
    xs = [
        rank_input(hvdtune.rank(), np.float32, s, salt=i)
        for i, s in enumerate(shapes)
    ]
    outs = hvdtune.grouped_allreduce(xs, op=hvdtune.Average, name="group")
    for i, (s, out) in enumerate(zip(shapes, outs)):
        np.testing.assert_allclose(
            out, reference(hvdtune.Average, np.float32, s, salt=i), rtol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_broadcast_from_every_root(dtype):
    for root in range(hvdtune.size()):
        x = rank_input(hvdtune.rank(), dtype, (4, 3))
        out = hvdtune.broadcast(x, root, name="bcast.%d" % root)
        np.testing.assert_array_equal(out, rank_input(root, dtype, (4, 3)))
        # Not in place: the caller's array keeps its values.
        np.testing.assert_array_equal(x, rank_input(hvdtune.rank(), dtype,
                                                    (4, 3)))
        hvdtune.broadcast(x, root, name="bcast_inplace.%d" % root,
                          inplace=True)
        np.testing.assert_array_equal(x, rank_input(root, dtype, (4, 3)))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_allgather_uneven_first_dimension(dtype):
    x = rank_input(hvdtune.rank(), dtype, (hvdtune.rank() + 1, 3))
    out = hvdtune.allgather(x, name="gather")
    expected = np.concatenate(
        [rank_input(r, dtype, (r + 1, 3)) for r in range(hvdtune.size())])
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, expected)


def test_torch_tensors_through_the_core_module():
    # bfloat16 has no numpy type: the runtime reads the tensor's memory.
    t = torch.arange(6, dtype=torch.bfloat16) + hvdtune.rank()
    out = torch.empty_like(t)
    hvdtune._core.allreduce_async("torch.bf16", t, out, "sum").wait()
    expected = sum(
        torch.arange(6, dtype=torch.float32) + r
        for r in range(hvdtune.size()))
    assert torch.equal(out, expected.to(torch.bfloat16))


def test_gil_is_released_while_waiting():
    """Rank 0 waits for a collective that rank 1 joins 0.5 s late; a Python
    thread on rank 0 must keep running meanwhile."""
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.time())
            time.sleep(0.01)

    barrier("gil.start")
    if hvdtune.rank() == 1:
        time.sleep(0.5)
    thread = threading.Thread(target=ticker)
    thread.start()
    start = time.time()
    hvdtune.allreduce(np.ones(4, np.float32), name="gil")
    waited = time.time() - start
    stop.set()
    thread.join()
    if hvdtune.rank() == 0:
        assert waited > 0.25
        assert len(ticks) > 5, "the waiting thread held the GIL"


def test_shape_mismatch_fails_on_every_rank_with_the_runtimes_message():
    x = np.ones(3 + hvdtune.rank(), np.float32)
    with pytest.raises(hvdtune.HvdtuneError) as info:
        hvdtune.allreduce(x, name="mismatch.shape")
    assert info.value.code == "mismatch"
    assert "mismatch.shape" in str(info.value)
    # The runtime goes on.
    out = hvdtune.allreduce(np.ones(2, np.float32), op=hvdtune.Sum,
                            name="after.mismatch")
    np.testing.assert_array_equal(out, np.full(2, hvdtune.size()))


def test_arguments_refused_with_clear_errors():
    with pytest.raises(hvdtune.HvdtuneError, match="not C-contiguous|"
                       "C-contiguous"):
        hvdtune.allreduce(np.ones((4, 4), np.float32)[:, ::2], name="nc")
    with pytest.raises(hvdtune.HvdtuneError, match="unsupported element"):
        hvdtune.allreduce(np.ones(3, np.complex64), name="complex")
    with pytest.raises(hvdtune.HvdtuneError, match="unknown reduce op"):
        hvdtune.allreduce(np.ones(3, np.float32), op="prod", name="op")
    with pytest.raises(hvdtune.HvdtuneError, match="does not match"):
        hvdtune.allreduce(np.ones(3, np.float32), name="out",
                          output=np.ones(4, np.float32))
    with pytest.raises(hvdtune.HvdtuneError, match="writable"):
        readonly = np.ones(3, np.float32)
        readonly.setflags(write=False)
        hvdtune.broadcast(readonly, 0, name="ro", inplace=True)
    with pytest.raises(hvdtune.HvdtuneError, match="scalar"):
        hvdtune.allgather(np.float32(3.0), name="scalar")
    with pytest.raises(hvdtune.HvdtuneError) as info:
        hvdtune.broadcast(np.ones(3), hvdtune.size(), name="badroot")
    assert info.value.code == "invalid_argument"


def test_a_dropped_handle_keeps_its_buffers_until_done():
    out = np.zeros(1 << 16, np.float32)
    if hvdtune.rank() == 1:
        time.sleep(0.2)
    h = hvdtune.allreduce_async(np.ones(1 << 16, np.float32), hvdtune.Sum,
                                "dropped", output=out)
    del h  # the input array's only reference was the handle's
    # The orphan list is pruned on the next enqueue once it completed.
    deadline = time.time() + 30
    while hvdtune._core.pending_orphans() > 0:
        assert time.time() < deadline
        hvdtune.allreduce(np.ones(1, np.float32), name="prune")
    np.testing.assert_array_equal(out, np.full(1 << 16, hvdtune.size()))


def test_knobs_and_autotune_status():
    assert hvdtune.knobs()["allreduce_algorithm"] in ("native", "ring",
                                                      "hierarchical")
    status = hvdtune.autotune_status()
    assert status["phase"] == "off"
    hvdtune.mark_step()
    assert hvdtune.stats()["tensors_completed"] > 0


def test_shutdown_then_init_again():
    barrier("before.shutdown")
    hvdtune.shutdown()
    assert not hvdtune.is_initialized()
    with pytest.raises(hvdtune.HvdtuneError) as info:
        hvdtune.allreduce(np.ones(2), name="after.shutdown")
    assert info.value.code == "not_initialized"
    hvdtune.init()
    out = hvdtune.allreduce(np.ones(2), op=hvdtune.Sum, name="reinit")
    np.testing.assert_array_equal(out, np.full(2, float(hvdtune.size())))
