"""Runtime: lowering of HOP DAGs to instructions, the interpreter and the local kernels."""
