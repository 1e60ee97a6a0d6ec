"""vLLM's command line as a manifest gives it: flags the simulator does not model are named."""

from pathlib import Path

from sizer.inputs.manifests.commands import parse_vllm_args


def test_swap_space_is_named_as_not_modelled():
    # swapped-out KV has no host capacity limit in the simulator, so --swap-space changes nothing
    fields, model, notes = parse_vllm_args(["vllm", "serve", "meta-llama/Llama-3.1-8B", "--swap-space", "8",
                                            "--max-num-seqs", "64"], "deploy.yaml")
    assert model == "meta-llama/Llama-3.1-8B" and fields == {"max_num_seqs": 64}
    assert notes == ["vLLM flags unknown to sizer, not modelled and not checked (a flag vLLM does not have stops it "
                     "at start): --swap-space"]


SGLANG_EAGLE_MANIFEST = """apiVersion: apps/v1
kind: Deployment
metadata: {name: sg}
spec:
  replicas: 1
  selector: {matchLabels: {app: sg}}
  template:
    metadata: {labels: {app: sg}}
    spec:
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
      containers:
        - name: sglang
          image: lmsysorg/sglang:latest
          command: ["python3", "-m", "sglang.launch_server", "--model-path", "CONFIG",
                    "--speculative-algorithm", "EAGLE"]
          resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_sglang_draft_length_on_a_config_with_bad_architectures_is_one_line(tmp_path):
    # SGLang picks EAGLE's draft length by the target's architecture (commands._sglang_auto_speculative): a
    # config.json whose `architectures` is not a list of strings was indexed as it was (TypeError on `true`);
    # now the draft length is left unknown and the plan refuses the config in one line naming the key
    import json

    from typer.testing import CliRunner

    from sizer.cli import app
    config = json.loads((Path(__file__).parents[2] / "bad_inputs" / "config" / "architectures-number.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "architectures": True}))
    (tmp_path / "deploy.yaml").write_text(SGLANG_EAGLE_MANIFEST.replace("CONFIG", str(tmp_path / "config.json")))
    result = CliRunner().invoke(app, ["check", str(tmp_path / "deploy.yaml")])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "config.json: architectures: expected a list of strings" in line
