"""Plan pictures: ``lafuse explain --format svg|png|dot`` and ``Matrix.visualize``: valid SVG (parsed),
one node per HOP of the program's DAGs up to ``sizes``, fused operators as clusters in the physical
plan, and clear errors (no Graphviz, png without -o, the parse stage), never a partial file."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import lafuse as lf
from lafuse.compiler import Compiler
from lafuse.config import Config
from lafuse.plan import dot

SVG = "{http://www.w3.org/2000/svg}"
SCRIPT = """X = rand(rows=200, cols=100, seed=1)
Y = rand(rows=200, cols=100, seed=2)
s = sum(X * Y * 2)
M = t(X) %*% Y
print(s + sum(M))
"""


def _cli(tmp_path, *args: str) -> subprocess.CompletedProcess:
    path = tmp_path / "s.dml"
    path.write_text(SCRIPT)
    env = {**os.environ, "LAFUSE_BACKGROUND": "0"}
    return subprocess.run([sys.executable, "-m", "lafuse", "explain", str(path), *args], capture_output=True,
                          env=env, timeout=300)


def _groups(svg: bytes, cls: str) -> list[ET.Element]:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return [g for g in root.iter(f"{SVG}g") if g.get("class") == cls]


def test_hop_dags_as_svg_have_one_node_per_hop(tmp_path):
    out = tmp_path / "hops.svg"
    res = _cli(tmp_path, "--until", "sizes", "--format", "svg", "-o", str(out))
    assert res.returncode == 0, res.stderr
    prog = Compiler(Config()).compile_text(SCRIPT, "s.dml")
    hops = sum(len(b.dag.hops()) for b in prog.blocks if hasattr(b, "dag"))
    assert len(_groups(out.read_bytes(), "node")) == hops > 5


def test_the_physical_plan_draws_fused_operators_as_clusters(tmp_path):
    out = tmp_path / "plan.svg"
    res = _cli(tmp_path, "--until", "plan", "--fusion", "fuse-all", "--format", "svg", "-o", str(out))
    assert res.returncode == 0, res.stderr
    svg = out.read_bytes()
    titles = [g.findtext(f"{SVG}text") or "" for g in _groups(svg, "cluster")]
    assert any("cell template" in t for t in titles), titles  # sum(X * Y * 2): one fused cell operator
    texts = {t.text for t in ET.fromstring(svg).iter(f"{SVG}text")}
    assert "spoofCell" in texts and "main, lines 1-5" in texts, texts


def test_dot_goes_to_stdout_and_png_needs_a_file(tmp_path):
    res = _cli(tmp_path, "--until", "plan", "--format", "dot")
    assert res.returncode == 0 and res.stdout.startswith(b"digraph lafuse {")
    res = _cli(tmp_path, "--until", "plan", "--format", "png")
    assert res.returncode == 1 and b"give -o FILE" in res.stderr
    out = tmp_path / "plan.png"
    assert _cli(tmp_path, "--until", "plan", "--format", "png", "-o", str(out)).returncode == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = _cli(tmp_path, "--until", "parse", "--format", "svg")
    assert res.returncode == 1 and b"parse has no DAG" in res.stderr


def test_without_graphviz_the_message_says_how_to_get_it(tmp_path):
    out = tmp_path / "x.svg"
    env_path = str(tmp_path / "empty")  # (dot not on this PATH)
    os.mkdir(env_path)
    path = tmp_path / "s.dml"
    path.write_text(SCRIPT)
    res = subprocess.run([sys.executable, "-m", "lafuse", "explain", str(path), "--format", "svg", "-o", str(out)],
                         capture_output=True, env={**os.environ, "PATH": env_path, "LAFUSE_BACKGROUND": "0"},
                         timeout=300)
    assert res.returncode == 1 and b"needs Graphviz's 'dot' program" in res.stderr
    assert not out.exists() and not list(tmp_path.glob(".x.svg.tmp_*"))  # no partial file


def test_an_unwritable_output_is_an_error_not_a_traceback(tmp_path):
    res = _cli(tmp_path, "--format", "dot", "-o", str(tmp_path / "no" / "such" / "dir.dot"))
    assert res.returncode == 1 and b"cannot write" in res.stderr and b"Traceback" not in res.stderr


def test_visualize_a_lazy_expression(tmp_path):
    rng = np.random.default_rng(1)
    X, Y = lf.matrix(rng.random((100, 50))), lf.matrix(rng.random((100, 50)))
    e = (X * Y * 2).sum()
    with lf.config(fusion="fuse-all"):
        pic = e.visualize(tmp_path / "e.svg")
        svg = (tmp_path / "e.svg").read_bytes()
        assert svg == pic.render("svg")
        assert pic._repr_svg_().startswith("<?xml")
        hops = e.visualize(until="sizes")
    assert any("cell template" in (g.findtext(f"{SVG}text") or "") for g in _groups(svg, "cluster"))
    assert "spoof" not in hops.source and "sum" in hops.source
    assert e.compute() == pytest.approx(2 * float((np.asarray(X) * np.asarray(Y)).sum()))  # (nothing ran before)
    with pytest.raises(ValueError, match="until must be one of"):
        e.visualize(until="parse")


def test_render_rejects_an_unknown_format():
    with pytest.raises(ValueError, match="unknown picture format"):
        dot.render("digraph {}", "gif")
