"""Arrays are used in place (zero copies), through NumPy or any object with __dlpack__; bad
arrays and bad dtype/op combinations are typed errors raised before anything is sent."""
import numpy as np
import pytest

import tdist as dist
from conftest import init, run_ranks


class DLPackOnly:
    """Exposes a NumPy array only through the DLPack protocol (as another framework would)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


class BFloat16Tensor:
    """A bfloat16 tensor over uint16 storage, exported through DLPack with dtype code kDLBfloat."""

    def __init__(self, bits):
        self.bits = bits  # uint16 array

    def __dlpack__(self, stream=None):
        import ctypes
        import ctypes.util

        capsule = self.bits.__dlpack__()
        # Patch the DLTensor's dtype (code 4 = kDLBfloat) inside the capsule.
        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.restype = ctypes.c_void_p
        get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        ptr = get_pointer(capsule, b"dltensor")
        # DLTensor: void* data; DLDevice{int32,int32}; int32 ndim; DLDataType{uint8 code, uint8 bits, uint16 lanes}
        ctypes.c_uint8.from_address(ptr + 8 + 8 + 4).value = 4
        return capsule

    def __dlpack_device__(self):
        return self.bits.__dlpack_device__()


def to_bf16_bits(x):
    return (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def in_place(rank, size):
    init()
    a = np.full(8, rank + 1, np.float32)
    base = a.__array_interface__["data"][0]
    before = a
    dist.all_reduce(a)
    assert a is before and a.__array_interface__["data"][0] == base
    assert np.all(a == sum(range(1, size + 1)))
    # A contiguous view writes into its base array.
    big = np.zeros((4, 6), np.int64)
    row = big[2]
    row[:] = rank
    dist.all_reduce(row)
    assert np.all(big[2] == sum(range(size))) and np.all(big[[0, 1, 3]] == 0)
    # A 0-d array is one element.
    s = np.array(rank + 1.0)
    dist.all_reduce(s, op=dist.ReduceOp.MAX)
    assert s == size
    # DLPack-only objects, written in place.
    backing = np.full(5, rank, np.int32)
    dist.all_reduce(DLPackOnly(backing))
    assert np.all(backing == sum(range(size)))
    outs = [np.zeros(2, np.float64) for _ in range(size)]
    dist.all_gather([DLPackOnly(o) for o in outs], DLPackOnly(np.full(2, rank, np.float64)))
    assert all(np.all(outs[r] == r) for r in range(size))
    # bfloat16 through DLPack: 1.5 * (rank+1) summed exactly.
    bits = to_bf16_bits(np.full(4, 1.5 * (rank + 1)))
    dist.all_reduce(BFloat16Tensor(bits))
    total = (bits.astype(np.uint32) << 16).view(np.float32)
    assert np.all(total == 1.5 * sum(range(1, size + 1))), total
    dist.destroy_process_group()


def test_zero_copy_numpy_and_dlpack():
    run_ranks(in_place, 2)


def bad_arguments(rank, size):
    init()
    with pytest.raises(ValueError, match="not C-contiguous"):
        dist.all_reduce(np.zeros((4, 4), np.float32)[:, 1])
    ro = np.zeros(3, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        dist.broadcast(ro, src=0)
    dist.all_gather([np.zeros(3, np.float32) for _ in range(size)], ro)  # a read-only input is fine
    with pytest.raises(ValueError, match="dtype"):
        dist.all_reduce(np.zeros(2, np.uint32))
    with pytest.raises(TypeError, match="numpy.ndarray or an object with __dlpack__"):
        dist.all_reduce([1, 2, 3])
    with pytest.raises(dist.DistValueError, match="BAND.*float32"):
        dist.all_reduce(np.zeros(2, np.float32), op=dist.ReduceOp.BAND)
    with pytest.raises(dist.DistValueError, match="MAX.*complex"):
        dist.all_reduce(np.zeros(2, np.complex64), op=dist.ReduceOp.MAX)
    with pytest.raises(dist.DistValueError):
        dist.all_gather_into_tensor(np.zeros(size * 3 + 1, np.float32), np.zeros(3, np.float32))
    with pytest.raises(dist.DistValueError):
        dist.send(np.zeros(1), dst=size + 3)
    with pytest.raises(dist.DistValueError, match="dst"):
        dist.send(np.zeros(1))
    # Nothing was sent: the group still works.
    t = np.ones(2, np.float32)
    dist.all_reduce(t)
    assert np.all(t == size)
    dist.destroy_process_group()


def test_errors_are_typed_and_leave_the_group_usable():
    run_ranks(bad_arguments, 2)


def test_exception_hierarchy():
    assert issubclass(dist.DistError, RuntimeError)
    for cls in (dist.DistBackendError, dist.DistNetworkError, dist.DistStoreError, dist.DistValueError):
        assert issubclass(cls, dist.DistError)
    assert issubclass(dist.DistValueError, ValueError)
    assert dist.reduce_op is dist.ReduceOp
    assert dist.ReduceOp.SUM == dist.ReduceOp(dist.ReduceOp.SUM) != dist.ReduceOp.MAX
    assert repr(dist.ReduceOp.premul_sum(2.0)).startswith("ReduceOp.PREMUL_SUM")
    assert dist.is_available() and not dist.is_initialized()
    # torch's availability checks and Backend names.
    assert dist.is_gloo_available() and isinstance(dist.is_mpi_available(), bool)
    # nccl: true where the build has CUDA and NCCL loads (no GPU needed), as torch.
    assert isinstance(dist.is_nccl_available(), bool)
    assert dist.Backend("GLOO") == dist.Backend.GLOO == "gloo" and dist.Backend.MPI == "mpi"
    assert dist.Backend.NCCL == "nccl"
