"""Runtime: binding physical plans to code, the interpreter and the local kernels."""
