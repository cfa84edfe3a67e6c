"""examples/tour.ipynb runs top to bottom in a Jupyter kernel (nbclient), and its plan picture is the
fused plan: an SVG with the cell template's cluster."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
from nbclient import NotebookClient

TOUR = Path(__file__).resolve().parent.parent / "examples" / "tour.ipynb"
SVG = "{http://www.w3.org/2000/svg}"


def test_the_tour_notebook_runs_and_draws_the_fused_plan(tmp_path):
    nb = nbformat.read(TOUR, as_version=4)
    env = {"LAFUSE_BACKGROUND": "0"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # (the kernel inherits this process's environment)
    try:
        NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    svgs = {c.source: o["data"]["image/svg+xml"] for c in nb.cells if c.cell_type == "code" for o in c.outputs
            if o.output_type in ("execute_result", "display_data") and "image/svg+xml" in o.get("data", {})}
    assert any(src.endswith("\ne") for src in svgs)  # a lazy matrix shows as its plan
    (pic,) = [svg for src, svg in svgs.items() if "visualize()" in src]
    root = ET.fromstring(pic)
    clusters = [g.findtext(f"{SVG}text") or "" for g in root.iter(f"{SVG}g") if g.get("class") == "cluster"]
    assert any("cell template" in t for t in clusters), clusters
    results = {c.source.splitlines()[-1]: c.outputs for c in nb.cells if c.cell_type == "code"}
    shares = results["np.shares_memory(X.node.value, x)"][0]["data"]["text/plain"]
    assert shares == "True"
