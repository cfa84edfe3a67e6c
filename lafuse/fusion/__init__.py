"""Operator fusion (paper 000): CPlans, templates, memo-table exploration and plan selection.

Built up under issue #5; so far the CPlan representation (``cplan.py``) that templates produce and
the code generator and the reference interpreter (``lafuse.codegen.reference``) consume.
"""
