"""vLLM's command line as a manifest gives it: flags the simulator does not model are named."""

from sizer.inputs.manifests.commands import parse_vllm_args


def test_swap_space_is_named_as_not_modelled():
    # swapped-out KV has no host capacity limit in the simulator, so --swap-space changes nothing
    fields, model, notes = parse_vllm_args(["vllm", "serve", "meta-llama/Llama-3.1-8B", "--swap-space", "8",
                                            "--max-num-seqs", "64"], "deploy.yaml")
    assert model == "meta-llama/Llama-3.1-8B" and fields == {"max_num_seqs": 64}
    assert notes == ["vLLM flags not modelled: --swap-space"]
