"""Grammar layer: lark grammar → immutable IR, role projections (L2), schema lexicons (L3)."""

from .dialects import DIALECTS, load_dialect
from .ir import Grammar, RoleProjection, Rule, Terminal
from .lexer import LexerTables
from .lexicon import CategoryWords, SchemaLexicon
from .tables import LALRTables

__all__ = [
    "DIALECTS",
    "CategoryWords",
    "Grammar",
    "LALRTables",
    "LexerTables",
    "RoleProjection",
    "Rule",
    "SchemaLexicon",
    "Terminal",
    "load_dialect",
]
