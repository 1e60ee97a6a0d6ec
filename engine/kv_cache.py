"""The paged KV cache tensors: per layer, K and V as `[num_blocks, block_size, kv_heads, head_dim]`.

The block manager (simulator/kv_cache.py, shared with the simulator) decides which physical
block ids a request owns; this module only holds the memory those ids index and writes the
new tokens' K/V into their slots. A slot is `block_id * block_size + offset in the block`.
"""

from __future__ import annotations

import torch


class PagedKVCache:
    def __init__(self, num_layers: int, num_blocks: int, block_size: int, num_kv_heads: int,
                 head_dim: int, dtype: torch.dtype, device: torch.device | str):
        shape = (num_layers, num_blocks, block_size, num_kv_heads, head_dim)
        self.block_size = block_size
        self.num_blocks = num_blocks
        # zeros, not empty: every page is touched now, as a GPU's pool is resident from the start;
        # on a CPU, first-touch page faults would otherwise land inside the timed steps.
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)

    def layer(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.k[index], self.v[index]

    def slots(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """One layer's K and V viewed as `[num_blocks * block_size, kv_heads, head_dim]`: a token's K/V at its slot
        (the rope_kv kernels write the new tokens' there)."""
        k_cache, v_cache = self.layer(index)
        return k_cache.view(-1, *k_cache.shape[2:]), v_cache.view(-1, *v_cache.shape[2:])

    @staticmethod
    def bytes_per_block(num_layers: int, block_size: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype) -> int:
        # K and V, every layer: 2 x layers x block_size x kv_heads x head_dim x element size
        return 2 * num_layers * block_size * num_kv_heads * head_dim * dtype.itemsize


def slots_for(block_ids: list[int], start: int, count: int, block_size: int) -> list[int]:
    """Slots of token positions start .. start+count-1 of a sequence owning `block_ids`."""
    return [block_ids[p // block_size] * block_size + p % block_size for p in range(start, start + count)]
