"""RMSNorm, optionally fused with the residual add that precedes it in every layer.

`rms_norm(x, weight, eps, residual)` returns `(normed, new_residual)` where new_residual
= x + residual (or x when there is no residual) and normed = new_residual / rms * weight.
Fused, the pair costs one read of x and residual and two writes instead of three passes;
on a GPU at decode batch sizes these elementwise layers are launch- and bandwidth-bound, so
fusing pays. The arithmetic is done in float32 whatever the storage dtype.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_kernel(x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, hidden, eps,
                    stride_x, stride_r, stride_o, stride_ro,
                    HAS_RESIDUAL: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < hidden
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        x += tl.load(res_ptr + row * stride_r + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(res_out_ptr + row * stride_ro + cols, x.to(res_out_ptr.dtype.element_ty), mask=mask)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, 0) / hidden + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_o + cols, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float,
             residual: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton fused (residual add +) RMSNorm over the last dim of a 2-D tensor."""
    rows, hidden = x.shape
    out = torch.empty_like(x)
    if rows == 0:
        return out, x if residual is None else x + residual
    res_out = torch.empty_like(x) if residual is not None else x
    res_in = residual if residual is not None else x
    _rmsnorm_kernel[(rows,)](
        x, res_in, weight, out, res_out, hidden, eps,
        x.stride(0), res_in.stride(0), out.stride(0), res_out.stride(0),
        HAS_RESIDUAL=residual is not None, BLOCK=triton.next_power_of_2(hidden),
    )
    return out, res_out


def rms_norm_ref(x: torch.Tensor, weight: torch.Tensor, eps: float,
                 residual: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain-torch version with the same contract."""
    if residual is not None:
        x = x + residual
    xf = x.to(torch.promote_types(x.dtype, torch.float32))
    normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.to(xf.dtype)
    return normed.to(x.dtype), x
