"""Physical formats and operator implementations for a whole compute graph, chosen by cost (paper 002).

Which form a matrix takes (dense or CSR; one block, row strips, column strips or square tiles of
some size) and which implementation each operator runs on those forms changes run time by large
factors, and the best choice for one operator depends on its neighbours, since converting costs
too. Paper 002 states the problem over a catalogue of physical formats, atomic computation
implementations (each with a type-specification function: the input formats it takes, the format
it yields) and transformations (conversions and re-blockings), and solves it exactly by dynamic
programming: over a tree (§5, Alg. 3, Eq. 1) and, keeping joint costs for the vertices along a
frontier that share ancestors, over a DAG (§6, Alg. 4, Eq. 2); brute force (Alg. 2) checks both.

* ``graph``: the compute graph, the catalogue, the problem (its conversion and per-vertex tables)
  and the annotation a search returns;
* ``search``: brute force, the tree DP and the frontier DP; ``explain``: an annotation's operations
  with their cost and runner-up (the best plan without the chosen implementation);
* ``blocked``: a catalogue of blocked distributed formats with analytical costs and the paper's
  benchmark graphs (§8.4: Tree, DAG1, DAG2 at scale n).
"""

from lafuse.plan.layout.graph import Annotation, Catalogue, Graph, Impl, MType, Problem, Transform, Vertex
from lafuse.plan.layout.search import Row, brute_force, explain, frontier_dp, optimize, render, tree_dp

__all__ = ["Annotation", "Catalogue", "Graph", "Impl", "MType", "Problem", "Row", "Transform", "Vertex",
           "brute_force", "explain", "frontier_dp", "optimize", "render", "tree_dp"]
