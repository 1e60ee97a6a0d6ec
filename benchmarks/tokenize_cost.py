"""What an API server pays to tokenise a prompt's text, per token (sizer/sizing/presets.py INPUT_S_PER_PROMPT_TOKEN).

    python3 -m venv /tmp/tok && /tmp/tok/bin/pip install mistral-common tiktoken tokenizers transformers
    /tmp/tok/bin/python benchmarks/tokenize_cost.py [--lengths 1000 8000] [--prompts 30] [--repeats 3]

Not a dependency of sizer: these packages are installed in a venv of their own (nothing downloads at run time; the
tokenizer is the one mistral-common ships, Mistral's Tekken: a 131,072-token byte-level BPE of the tiktoken family,
as gpt-oss's o200k is, and Mistral-Nemo's tokenizer). vLLM, SGLang and trtllm-serve tokenise a prompt with a
Hugging Face fast tokenizer called through transformers (`tokenizer(text)`), so that is what is timed, with the Rust
`tokenizers` call alone and tiktoken beside it. The text is what `vllm bench serve`'s random dataset sends: the
decoded text of consecutive token ids from a random offset (its sample_random_requests), which the server tokenises
again. Prints the median and 10th percentile of seconds per token over the prompts and repeats; the machine's other
load only lengthens a call, so the 10th percentile is the less noisy figure.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import statistics
import tempfile
import time
from pathlib import Path


def tekken(path: Path):
    """(tiktoken encoding, Hugging Face tokenizer, transformers tokenizer, ordinary vocabulary size) of Tekken."""
    import tiktoken
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    data = json.loads(path.read_text())
    config = data["config"]
    vocab = config["default_vocab_size"] - config["default_num_special_tokens"]
    ranks = {base64.b64decode(v["token_bytes"]): v["rank"] for v in data["vocab"][:vocab]}
    with tempfile.NamedTemporaryFile("w", suffix=".tiktoken", delete=False) as f:   # the converter reads a file
        f.writelines(f"{base64.b64encode(b).decode()} {r}\n" for b, r in ranks.items())
    hf = TikTokenConverter(vocab_file=f.name, pattern=config["pattern"]).converted()
    Path(f.name).unlink()
    enc = tiktoken.Encoding("tekken", pat_str=config["pattern"], mergeable_ranks=ranks, special_tokens={})
    return enc, hf, PreTrainedTokenizerFast(tokenizer_object=hf), vocab


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", nargs="*", type=int, default=[1000, 8000], help="token ids a prompt is made of")
    ap.add_argument("--prompts", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import mistral_common

    enc, hf, wrapped, vocab = tekken(Path(mistral_common.__file__).parent / "data" / "tekken_240911.json")
    rng = random.Random(0)
    calls = {"transformers tokenizer(text)": lambda t: wrapped(t, add_special_tokens=False).input_ids,
             "tokenizers encode": lambda t: hf.encode(t, add_special_tokens=False).ids,
             "tiktoken encode": enc.encode}
    print(f"{'call':<30}{'ids':>7}{'tokens':>8}{'median us/token':>17}{'p10 us/token':>14}")
    for length in args.lengths:
        texts = []
        for _ in range(args.prompts):
            start = rng.randrange(vocab)
            texts.append(enc.decode([(start + j) % vocab for j in range(length)]))
        same = all(enc.encode(t) == hf.encode(t, add_special_tokens=False).ids for t in texts)
        for name, call in calls.items():
            call(texts[0])
            per_token = []
            for _ in range(args.repeats):
                for t in texts:
                    start_s = time.perf_counter()
                    n = len(call(t))
                    per_token.append((time.perf_counter() - start_s) / n)
            per_token.sort()
            tokens = statistics.mean(len(enc.encode(t)) for t in texts)
            print(f"{name:<30}{length:>7}{tokens:>8.0f}{statistics.median(per_token) * 1e6:>17.2f}"
                  f"{per_token[len(per_token) // 10] * 1e6:>14.2f}")
        print(f"(tokenizers and tiktoken give the same ids on these {args.prompts} prompts: {same})")


if __name__ == "__main__":
    main()
