"""Local (single-process) kernels over NumPy dense blocks and SciPy CSR blocks."""
