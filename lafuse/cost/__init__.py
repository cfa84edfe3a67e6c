"""Analytical cost model: hardware profile, per-instruction costs and program costing (paper 003)."""
