"""docs/gateway.md's field table is generated from the gateway dataclasses and must match them."""

from pathlib import Path

from sizer.inputs.gateway import render_docs


def test_gateway_field_table_matches_the_dataclasses():
    committed = (Path(__file__).resolve().parents[3] / "docs" / "gateway.md").read_text()
    assert committed.endswith(render_docs()), "regenerate the table at the end: python -m sizer.inputs.gateway"
    # every list item's fields are listed, e.g. a route's fallback chain and a pool's deployment
    assert "`gateway.routes[].fallback`" in committed and "`gateway.pools[].deployment.replicas`" in committed
