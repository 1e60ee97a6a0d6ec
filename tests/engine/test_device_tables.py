"""engine/device_tables.py: the engine's operators timed by shape on this CPU, in the kernel-table rows of
sizer/timing/kernel_tables.py (latencies in microseconds)."""

from engine import device_tables as dt
from engine.device import cpu_device
from engine.kernels import select

DEVICE = cpu_device()
KERNELS = select("torch")


def test_the_grid_covers_the_step_asked_for():
    g = dt.grid(max_num_batched_tokens=256, max_num_seqs=16, max_model_len=2048, block_size=16)
    assert g.tokens[0] == 1 and g.tokens[-1] == 256
    assert g.decode_seqs == (1, 2, 4, 8, 16)
    # KV length = cached tokens + the new one: microbench.context_grid(2047) + 1
    assert g.kv_tokens == (1, 33, 129, 513, 2048)
    assert g.prefill_seqs == (1, 2, 4, 8) and g.prompt_tokens[-1] == 2048
    assert dt.grid(64, 3, 512, 16).prefill_seqs == (1, 2)       # no more sequences than a step holds


def test_gemm_rows_time_each_shape_at_each_token_count():
    shapes = dt.TableShapes(gemms=((512, 256), (256, 512)), heads=(), hidden_size=256)
    g = dt.TableGrid(tokens=(1, 256), decode_seqs=(1,), kv_tokens=(1,), prefill_seqs=(1,), prompt_tokens=(16,),
                     max_prefill_tokens=16, block_size=16)
    rows = dt.gemm_rows(shapes, g, DEVICE)
    assert sorted(r[:4] for r in rows) == [("float32", 256, 512, 1), ("float32", 256, 512, 256),
                                          ("float32", 512, 256, 1), ("float32", 512, 256, 256)]
    t = {r[1:4]: r[4] for r in rows}
    # 256 rows do 256x the work of one: on any CPU more than twice the time
    assert t[(512, 256, 256)] > 2 * t[(512, 256, 1)] > 0


def test_attention_rows_are_keyed_by_head_shape_batch_and_length():
    shape = dt.HeadShape(num_heads=4, num_kv_heads=2, head_dim=32)
    g = dt.TableGrid(tokens=(1,), decode_seqs=(1, 8), kv_tokens=(33, 513), prefill_seqs=(1, 4),
                     prompt_tokens=(16, 256), max_prefill_tokens=256, block_size=16)
    generation = dt.generation_rows(shape, KERNELS, g, DEVICE)
    assert sorted(r[:6] for r in generation) == [("float32", 4, 2, 32, s, n) for s in (1, 8) for n in (33, 513)]
    t = {r[4:6]: r[6] for r in generation}
    assert t[(8, 513)] > t[(1, 33)]                  # 8 sequences of 513 read 124x the KV of one of 33
    context = dt.context_rows(shape, KERNELS, g, DEVICE)
    # 4 prompts of 256 = 1,024 tokens exceed the 256 measured at most: that point is left out
    assert sorted(r[4:6] for r in context) == [(1, 16), (1, 256), (4, 16)]
    t = {r[4:6]: r[6] for r in context}
    assert t[(1, 256)] > t[(1, 16)]                  # 256 x 257 / 2 query-key pairs against 136


def test_allreduce_rows_come_from_the_collectives_table():
    rows = dt.allreduce_rows([{"bytes": 4096, "time_s": 2e-5}, {"bytes": 16384, "time_s": 3e-5}], gpus=2)
    assert rows == [(2, 4096, 20.0), (2, 16384, 30.0)]
