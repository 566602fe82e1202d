"""Parser layer: persistent LALR(1) stack, byte scanner, the incremental viable-prefix oracle."""

from .incremental import (
    Configuration,
    IncrementalParser,
    ParserRuntime,
    ScanState,
    accepts,
    is_viable_prefix,
)
from .stack import StackNode

__all__ = [
    "Configuration",
    "IncrementalParser",
    "ParserRuntime",
    "ScanState",
    "StackNode",
    "accepts",
    "is_viable_prefix",
]
