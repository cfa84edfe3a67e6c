"""What runs leave for later runs: block executions fusion weighs (observed) and whether a script
used kernels, so its next run starts Numba at launch (prestart).

Why a package of its own, not inside ``fusion``: the command line reads and writes these files on
every run, and importing ``lafuse.fusion`` (its optimizer, templates and cost model) for that would
cost ~70 ms of every start, scripts without matrices included.
"""

# executions per fusion candidate (canonical plan hash) of the plans run in this process, counted by
# the interpreter: the profile feedback observed.save writes after a run
EXECUTED: dict[str, int] = {}
