"""lafuse: a declarative machine-learning system for Python in the line of Apache SystemDS.

``lafuse.run_dml(script, inputs={...}, outputs=[...])`` compiles and runs DML from Python; the
``lafuse`` command runs DML files (see README.md).
"""

from lafuse.compiler import run_dml

__all__ = ["run_dml"]
