from simulator.decode_group import DecodeGroup
from simulator.request import Request


def member(i, computed, out, target, blocks):
    r = Request(i, 0.0, computed - out + 1, target)
    r.num_computed_tokens, r.num_output_tokens, r.block_ids = computed, out, list(range(blocks))
    return r


def test_group_advances_by_ticks_and_touches_only_boundaries_and_finishes():
    g = DecodeGroup(block_size=4)
    a = member(0, 8, 1, 10, 2)      # 8 tokens fill 2 blocks of 4: the next token needs a block
    b = member(1, 9, 2, 4, 3)       # 9 tokens: needs a block again when it reaches 12
    g.join(a)
    g.join(b)
    assert list(g.needing_block()) == [a] and g.context_tokens == 17
    assert list(g.needing_block(3)) == [b]              # b holds 12 after 3 steps
    assert g.steps_to_first_finish() == 2               # b: 2 of 4 tokens, 2 to go
    assert g.advance(1, 1.0) == [] and (a.num_computed_tokens, a.num_output_tokens) == (8, 1)   # lazy
    assert g.advance(1, 2.0) == [b]                     # b finished and was synced on the way out
    assert (b.num_computed_tokens, b.num_output_tokens, b.last_token_s, b.group_tick) == (11, 4, 2.0, -1)
    g.sync(a)
    assert (a.num_computed_tokens, a.num_output_tokens, a.last_token_s) == (10, 3, 2.0)
    assert g.context_tokens == 10 and len(g) == 1
    assert g.dissolve() == [a] and len(g) == 0 and a.group_tick == -1


def test_the_first_finish_follows_each_finish_and_a_dissolve():
    # members joined out of finish order: the next finish is always the earliest left (a heap of ticks)
    g = DecodeGroup(block_size=16)
    late = member(0, 20, 1, 9, 2)       # 8 tokens to go: finishes at tick 8
    soon = member(1, 20, 1, 3, 2)       # 2 to go: tick 2
    mid = member(2, 20, 1, 6, 2)        # 5 to go: tick 5
    also_soon = member(3, 20, 1, 3, 2)  # tick 2 as well: one tick, two members
    for r in (late, soon, mid, also_soon):
        g.join(r)
    assert g.steps_to_first_finish() == 2
    assert g.advance(2, 1.0) == [soon, also_soon]
    assert g.steps_to_first_finish() == 3          # mid, 5 - 2
    assert g.advance(3, 2.0) == [mid] and g.steps_to_first_finish() == 3     # late, 8 - 5
    assert g.dissolve() == [late]
    fresh = member(4, 20, 1, 5, 2)                 # 4 to go, from the current tick 5
    g.join(fresh)
    assert g.steps_to_first_finish() == 4          # the dissolved member's tick 8 is forgotten
