"""Executable specification of the language L (the independent differential-test oracle)."""

from grid_sql.spec.oracle import SpecGrammar, SpecOracle, SpecTerminal

__all__ = ["SpecGrammar", "SpecOracle", "SpecTerminal"]
