"""sizer's bundled, offline copies of Hugging Face configs, keyed by HF id (sizer/inputs/catalog/hf/).

`index.json` lists each id with where its config came from and the model's licence as its card
states it. An entry is either a folder (`ORG--NAME/`, a verbatim copy of the repo's config.json and,
when the checkpoint has one, its hf_quant_config.json) or a catalog model (`catalog`: the entry in
catalog/models/ whose `_sizer.hf_repo` this id is). A model reference that is an HF id is read from
here only when it is neither a path nor in the local Hugging Face cache (sizer.inputs.checkpoint).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from validation.safe_load import load_json

STORE_DIR = Path(__file__).parent / "catalog" / "hf"
MODELS_DIR = Path(__file__).parent / "catalog" / "models"
BUNDLED = "sizer's bundled copy of"      # how a checkpoint read from here says where it was found


@dataclass(frozen=True)
class BundledConfig:
    """One HF id in the store: the config to read and what the index says of it."""
    hf_id: str                       # as the index spells it
    config_path: Path                # the folder's config.json, or the catalog model's .json
    in_catalog: bool                 # a catalog model: read as that catalog name reads
    source: str                      # where the copied files came from
    licence: str                     # the model's licence as its card states it ("not verified" when unread)
    checkpoint_of: str | None        # the catalog model this is a checkpoint of, if any

    @property
    def found_as(self) -> str:
        return f"{BUNDLED} {self.hf_id} (source: {self.source}; licence: {self.licence})"


@lru_cache(maxsize=1)
def _index() -> dict[str, BundledConfig]:
    out = {}
    for e in load_json(STORE_DIR / "index.json")["entries"]:
        catalog = e.get("catalog")
        path = MODELS_DIR / f"{catalog}.json" if catalog else STORE_DIR / e["folder"] / "config.json"
        out[e["hf_id"].lower()] = BundledConfig(e["hf_id"], path, bool(catalog), e["source"], e["licence"],
                                                e.get("checkpoint_of"))
    return out


def bundled(hf_id: str) -> BundledConfig | None:
    """The store's entry for `hf_id` (matched without regard to case, as the Hub does), else None."""
    return _index().get(hf_id.lower())


def bundled_ids() -> list[str]:
    return sorted(e.hf_id for e in _index().values())
