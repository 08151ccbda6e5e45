"""hvdtune.torch's Product and the one- and two-byte dtypes, on every rank
of `mpirun -np N python -m pytest`: results against what each rank can
compute on its own, and the errors."""

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
