"""Executable specification of the language L (the independent differential-test oracle).

``to_spec`` (in :mod:`grid_sql.spec.bridge`) turns a grammar IR into the oracle's input; the
oracle modules themselves import nothing from the implementation (the import contract's
``spec`` rule).
"""

from grid_sql.spec.bridge import to_spec
from grid_sql.spec.oracle import SpecGrammar, SpecOracle, SpecTerminal

__all__ = ["SpecGrammar", "SpecOracle", "SpecTerminal", "to_spec"]
