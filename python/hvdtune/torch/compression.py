"""Gradient compression for allreduce: Compression.none and Compression.fp16
(floating tensors travel as float16 and come back in their own dtype)."""

import torch


class Compressor:
    """compress(tensor) -> (tensor to send, context);
    decompress(tensor, context) -> tensor in the original dtype."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point and tensor.dtype != torch.float16:
            return tensor.to(torch.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tensor.to(ctx)


class Compression:
    """Horovod's names for the compressors."""
    none = NoneCompressor
    fp16 = FP16Compressor
