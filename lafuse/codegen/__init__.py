"""Code generation for fused operators (issue #5): CPlan -> kernel source. ``reference.py`` is the
pure-NumPy interpreter of CPlans, the living spec generated kernels are differential-tested against."""
