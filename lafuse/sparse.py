"""``scipy.sparse``, imported on first real use.

Why: importing SciPy costs ~0.1 s (its array-API layer pulls in numpy.f2py), more than a whole
small dense script. ``issparse`` answers without importing: a value can only be a SciPy sparse
matrix if SciPy was imported already.
"""

from __future__ import annotations

import sys
from typing import Any


class _LazySparse:
    def issparse(self, x: Any) -> bool:
        # (a module still being imported, e.g. by feedback.prestart's thread, has no sparse values
        # yet: this thread's first one waits for the import to finish)
        f = getattr(sys.modules.get("scipy.sparse"), "issparse", None)
        return f is not None and f(x)

    used = False  # a runtime operation asked for SciPy's sparse module (feedback.prestart records it)

    def __getattr__(self, name: str) -> Any:
        import scipy.sparse as mod  # deferred: SciPy's sparse module (~150 ms), on first use

        _LazySparse.used = True

        value = getattr(mod, name)
        if name != "issparse":
            setattr(self, name, value)  # later lookups skip __getattr__
        return value


sp: Any = _LazySparse()
