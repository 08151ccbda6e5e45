"""SyncBatchNorm: batch normalisation whose training statistics are those of
the whole job's batch (every rank's), built on allreduce."""

import torch

import hvdtune
from hvdtune.torch._common import Sum
from hvdtune.torch.allreduce import allreduce


class _SyncBatchNormFunction(torch.autograd.Function):
    """Normalises `x` (N, C, *) with the mean and variance over all ranks'
    rows; backward reduces the two per-channel sums the input gradient
    needs over the ranks as well."""

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps,
                momentum, name):
        channels = x.shape[1]
        dims = [d for d in range(x.dim()) if d != 1]
        xd = x.detach().double()
        local = torch.cat([
            xd.sum(dims), (xd * xd).sum(dims),
            torch.tensor([x.numel() // channels], dtype=torch.float64,
                         device=x.device)
        ])
        total = allreduce(local, op=Sum, name=name)
        count = total[-1].item()
        mean = total[:channels] / count
        var = total[channels:2 * channels] / count - mean * mean
        var = var.clamp_min(0)
        if running_mean is not None:
            with torch.no_grad():
                unbiased = var * (count / max(count - 1, 1))
                running_mean.mul_(1 - momentum).add_(
                    momentum * mean.to(running_mean.dtype))
                running_var.mul_(1 - momentum).add_(
                    momentum * unbiased.to(running_var.dtype))
        shape = [1, channels] + [1] * (x.dim() - 2)
        invstd = (var + eps).rsqrt()
        xhat = ((xd - mean.view(shape)) * invstd.view(shape)).to(x.dtype)
        out = xhat
        if weight is not None:
            out = out * weight.view(shape)
        if bias is not None:
            out = out + bias.view(shape)
        ctx.save_for_backward(xhat, weight, invstd.to(x.dtype))
        ctx.dims = dims
        ctx.count = count
        ctx.has_bias = bias is not None
        return out

    @staticmethod
    def backward(ctx, grad_out):
        xhat, weight, invstd = ctx.saved_tensors
        channels = xhat.shape[1]
        shape = [1, channels] + [1] * (xhat.dim() - 2)
        sum_dy = grad_out.sum(ctx.dims)
        sum_dy_xhat = (grad_out * xhat).sum(ctx.dims)
        grad_weight = sum_dy_xhat if weight is not None else None
        grad_bias = sum_dy if ctx.has_bias else None
        total = allreduce(torch.cat([sum_dy, sum_dy_xhat]), op=Sum)
        mean_dy = (total[:channels] / ctx.count).view(shape)
        mean_dy_xhat = (total[channels:] / ctx.count).view(shape)
        scale = invstd.view(shape)
        if weight is not None:
            scale = scale * weight.view(shape)
        grad_x = (grad_out - mean_dy - xhat * mean_dy_xhat) * scale
        return (grad_x, grad_weight, grad_bias, None, None, None, None,
                None)


class SyncBatchNorm(torch.nn.modules.batchnorm._BatchNorm):
    """Horovod's SyncBatchNorm: in training, the mean and variance are
    computed over the batch rows of every rank (so the result equals
    BatchNorm on the concatenated batch); in evaluation, the running
    statistics are used as by BatchNorm. Every rank must call it the same
    number of times, in the same order."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine,
                         track_running_stats)

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("expected at least 2D input (got %dD input)" %
                             input.dim())

    def forward(self, input):
        self._check_input_dim(input)
        if (not self.training and self.track_running_stats) or (
                hvdtune.size() == 1):
            return super().forward(input)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked)
        track = self.training and self.track_running_stats
        return _SyncBatchNormFunction.apply(
            input, self.weight, self.bias,
            self.running_mean if track else None,
            self.running_var if track else None, self.eps, momentum, None)

