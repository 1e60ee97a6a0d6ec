"""Extract the Kubernetes and LeaderWorkerSet schemas `--emit k8s` is validated against, once, into
tests/data/k8s_schemas/ (only the definitions the emitted kinds reach; descriptions dropped).

    # Kubernetes: the models of kubernetes-client/python, generated from the Kubernetes OpenAPI document of
    # the release named in their header; importable with pydantic (a folder holding kubernetes/client/models)
    PYTHONPATH=FOLDER python3 benchmarks/extract_k8s_schemas.py kubernetes COMMIT
    # LeaderWorkerSet: the CRD of a kubernetes-sigs/lws checkout at a tag
    python3 benchmarks/extract_k8s_schemas.py lws GIT_DIR TAG

Nothing here runs in sizer or its tests: only the JSON it writes is committed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "k8s_schemas"
DROP = ("description", "title", "default")


def _strip(node):
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k not in DROP}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _write(name: str, doc: dict) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / name).write_text(json.dumps(doc, indent=None, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"wrote {OUT / name}")


def kubernetes(commit: str) -> None:
    from kubernetes.client.models.v1_deployment import V1Deployment
    from kubernetes.client.models.v1_service import V1Service

    header = Path(sys.modules[V1Deployment.__module__].__file__).read_text()
    release = header.split("The version of the OpenAPI document: ", 1)[1].split()[0]
    defs, kinds = {}, {}
    for kind, model in (("Deployment", V1Deployment), ("Service", V1Service)):
        schema = model.model_json_schema(by_alias=True)
        defs |= schema.pop("$defs")
        kinds[kind] = _strip(schema)
    # A resource Quantity is a string in the OpenAPI document and the generated models; the API server's
    # decoder also takes a JSON number (k8s.io/apimachinery pkg/api/resource/quantity.go, UnmarshalJSON),
    # as every published manifest's `nvidia.com/gpu: 1` relies on
    requirements = defs["V1ResourceRequirements"]["properties"]
    for key in ("limits", "requests"):
        requirements[key]["anyOf"][0]["additionalProperties"] = {"type": ["string", "integer"]}
    _write(f"kubernetes-{release}.json", {
        "source": {"project": "kubernetes-client/python", "commit": commit, "openapi_document": release,
                   "how": "pydantic model_json_schema of the generated V1Deployment and V1Service models; "
                          "unknown fields refused (additionalProperties false); Quantity values take integers"},
        "kinds": kinds, "$defs": _strip(defs)})


def _structural(node):
    """A CRD schema as JSON Schema: an object with declared properties refuses others (the API server prunes
    them, and refuses them under strict field validation)."""
    if isinstance(node, dict):
        out = {k: _structural(v) for k, v in node.items() if k not in DROP}
        if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out \
                and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_structural(v) for v in node]
    return node


def lws(git_dir: str, tag: str) -> None:
    path = "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml"
    text = subprocess.run(["git", "-C", git_dir, "show", f"{tag}:{path}"], check=True, capture_output=True,
                          text=True).stdout
    commit = subprocess.run(["git", "-C", git_dir, "rev-list", "-n1", tag], check=True, capture_output=True,
                            text=True).stdout.strip()
    crd = yaml.safe_load(text)
    version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
    schema = _structural(version["schema"]["openAPIV3Schema"])
    _write(f"lws-{tag}.json", {
        "source": {"project": "kubernetes-sigs/lws", "tag": tag, "commit": commit, "file": path,
                   "version": version["name"],
                   "how": "the storage version's openAPIV3Schema; declared objects refuse unknown fields"},
        "group": crd["spec"]["group"], "kind": crd["spec"]["names"]["kind"], "schema": schema})


if __name__ == "__main__":
    if sys.argv[1] == "kubernetes":
        kubernetes(sys.argv[2])
    elif sys.argv[1] == "lws":
        lws(sys.argv[2], sys.argv[3])
    else:
        sys.exit("expected kubernetes COMMIT or lws GIT_DIR TAG")
