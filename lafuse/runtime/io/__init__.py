"""DML ``read``/``write`` with SystemDS 3.4.0's file layouts, so files move freely between the two.

Verified against SystemDS 3.4.0 (``-exec singlenode``, which writes one file, never a directory):

* ``csv``: one line per row, cells joined by ``sep``; zero cells are written as ``0`` (or left empty
  with ``sparse=TRUE``), other cells as Java ``Double.toString`` (``1.0``, ``1.0E-7``, ``NaN``,
  ``-Infinity``). ``header=TRUE`` adds ``C1,C2,...``. Reading honours ``header``, ``sep``, ``fill``
  (empty cells become ``default``, else an error) and ``naStrings`` (cells read as NaN).
* ``text`` (IJV): ``i j v`` lines, 1-based, non-zeros only, row-major; an all-zero matrix is the single
  line ``0 0 0``. It is the default write format.
* ``mm``: ``%%MatrixMarket matrix coordinate real general``, then ``rows cols nnz``, then IJV lines
  (``0 0 0`` when empty); SystemDS writes *no* ``.mtd`` for mm. Reading accepts real/integer/pattern
  and general/symmetric, and rejects array, complex and skew-symmetric like SystemDS.
* ``binary`` is SystemDS's Hadoop SequenceFile of Java-serialized blocks, which has no sensible
  Python reader; lafuse stores ``binary`` (and ``npy``) as NumPy ``.npy`` (dense) or SciPy ``.npz``
  (sparse) under the exact path given. Such files are not readable by SystemDS.
* Every write except mm leaves ``<path>.mtd``: a JSON object with 4-space indentation and no final
  newline whose keys come in SystemDS's order. A read merges ``<path>.mtd`` with its own parameters
  and, like SystemDS, fails when both give different values for the same key, and on keys SystemDS
  does not know.
* Scalars are written as their bare text (no newline): ``3.5``, ``7``, ``true``, ``hello``.
* Writing a matrix with zero rows or columns fails, as in SystemDS (except to npy).

Safety (``atomic.py``, ``lafuse/mtd.py``): a write replaces the data file and then its ``.mtd`` through
fsynced temporary files, so a kill or an error never leaves a partial file; the ``.mtd``'s
``description`` records the data file's length and CRC-32, so a data file paired with metadata of
another write is an error, not another matrix. Reads compare the data with the declared rows, cols
and nnz (and a MatrixMarket file's entries with its size line), and ask the memory budget before
they allocate.

Deliberate differences: ``text`` without known dimensions infers them from the largest indices
(SystemDS refuses); a read without format or ``.mtd`` guesses the format from the extension or the
content (csv by default, tab-separated for ``.tsv``); a csv with fewer rows than declared is an error
(SystemDS pads it with zero rows, silently at its default log level); a declared nnz must match
(SystemDS does not check it); a UTF-8 byte order mark at the start of a MatrixMarket file is skipped
(SystemDS skips it in csv and text files, as Hadoop's line reader does, but not before an mm header).
"""

from lafuse.mtd import MATRIX_FORMATS
from lafuse.runtime.io.readers import read_value
from lafuse.runtime.io.text import parse_java_double
from lafuse.runtime.io.writers import write_value

__all__ = ["MATRIX_FORMATS", "parse_java_double", "read_value", "write_value"]
