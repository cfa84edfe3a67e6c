"""Probability distribution functions: ``cdf``/``icdf`` and the R-style ``pnorm``, ``qnorm``,
``pt``, ``qt``, ``pf``, ``qf``, ``pchisq``, ``qchisq``, ``pexp``, ``qexp`` (SystemDS's
parameterized builtins, used e.g. by its glmPredict for p-values).

Semantics checked on SystemDS 3.4.0: scalar in, DOUBLE scalar out; ``lower.tail=FALSE`` gives the
upper tail (for the quantile functions: the quantile of ``1 - p``); ``pexp``'s ``rate`` is
1/mean. SystemDS evaluates them with commons-math; SciPy agrees to a few ulp for the cdfs and to
about 1e-10 relative for the inverses (commons-math's root solver stops at 1e-9 absolute).
"""

from __future__ import annotations

from typing import Any

from lafuse.errors import DMLRuntimeError


def _dist(name: str, mean: Any, sd: Any, df: Any, df1: Any, df2: Any, rate: Any) -> Any:
    from scipy import stats  # deferred: scipy.stats (~390 ms), only for distribution functions

    def need(v: Any, what: str) -> float:
        if v is None:
            raise DMLRuntimeError(f"distribution '{name}' needs the parameter '{what}'")
        return float(v)

    if name == "normal":
        return stats.norm(loc=0.0 if mean is None else float(mean), scale=1.0 if sd is None else float(sd))
    if name == "t":
        return stats.t(need(df, "df"))
    if name == "chisq":
        return stats.chi2(need(df, "df"))
    if name == "f":
        return stats.f(need(df1, "df1"), need(df2, "df2"))
    if name == "exp":
        return stats.expon(scale=1.0 / (1.0 if rate is None else float(rate)))
    raise DMLRuntimeError(f"unknown distribution '{name}': use normal, t, chisq, f or exp")


def k_cdf(target: Any, dist: Any, mean: Any = None, sd: Any = None, df: Any = None, df1: Any = None,
          df2: Any = None, rate: Any = None, lower_tail: Any = True) -> float:
    d = _dist(str(dist), mean, sd, df, df1, df2, rate)
    x = float(target)
    return float(d.cdf(x) if lower_tail else d.sf(x))


def k_icdf(target: Any, dist: Any, mean: Any = None, sd: Any = None, df: Any = None, df1: Any = None,
           df2: Any = None, rate: Any = None, lower_tail: Any = True) -> float:
    p = float(target)
    if not 0.0 <= p <= 1.0:
        raise DMLRuntimeError(f"icdf: probability {p} is outside [0, 1]")
    d = _dist(str(dist), mean, sd, df, df1, df2, rate)
    return float(d.ppf(p) if lower_tail else d.isf(p))


# R-style names -> (distribution, its parameter names); cumulative (p*) and quantile (q*) forms
R_STYLE: dict[str, tuple[str, tuple[str, ...]]] = {
    "norm": ("normal", ("mean", "sd")), "t": ("t", ("df",)), "chisq": ("chisq", ("df",)),
    "f": ("f", ("df1", "df2")), "exp": ("exp", ("rate",)),
}


def make_r_style(prefix: str, short: str) -> Any:
    dist, names = R_STYLE[short]
    base = k_cdf if prefix == "p" else k_icdf

    def kernel(target: Any, *args: Any) -> float:
        params = dict(zip(names, args[:-1]))
        return base(target, dist, lower_tail=args[-1], **params)

    kernel.__name__ = f"k_{prefix}{short}"
    return kernel
