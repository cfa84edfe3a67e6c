"""The names of the compilation chain's stages, in order (lafuse.compiler runs them; ``lafuse explain
--until STAGE`` stops after one). A foundation module: the command line reads the names without
importing the compiler, whose imports a run starts in the background first (feedback.prestart)."""

from __future__ import annotations

PROGRAM_STAGES = ("parse", "build", "liveness", "rewrite", "sizes")  # once per script (a function: once per compile)
BLOCK_STAGES = ("fuse", "plan", "lower")  # per block when it first runs, again at each dynamic recompilation
STAGES = PROGRAM_STAGES + BLOCK_STAGES

# earlier names of ``explain --until`` levels, still accepted
ALIASES = {"parsed": "parse", "hops": "build", "rewritten": "sizes", "fused": "fuse", "runtime": "plan",
           "codegen": "lower"}
