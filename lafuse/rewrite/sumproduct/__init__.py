"""Sum-product optimization (paper 001 §3): the aggregation and product operators of a HOP DAG
translated into sum-product plans (``ir``), their equivalent plans enumerated by the elementary
rewrites (``plans``), and the cheapest chosen by the cost model together with fusion (``rule``)."""
