"""Token masks over real LLM vocabularies: byte spellings and the token trie (paper §2, §4.1)."""

from grid_sql.mask.vocab import (
    GGUFFormatError,
    TokenizerError,
    UnsupportedTokenizerError,
    Vocabulary,
    VocabularyIncompleteWarning,
    VocabularyWarning,
)

__all__ = [
    "GGUFFormatError",
    "TokenizerError",
    "UnsupportedTokenizerError",
    "Vocabulary",
    "VocabularyIncompleteWarning",
    "VocabularyWarning",
]
