"""Token masks over real LLM vocabularies: byte spellings and the token trie (paper §2, §4.1)."""

from grid_sql.mask.trie import NODE_DTYPE, TokenTrie, get_token_trie
from grid_sql.mask.vocab import (
    GGUFFormatError,
    TokenizerError,
    UnsupportedTokenizerError,
    Vocabulary,
    VocabularyIncompleteWarning,
    VocabularyWarning,
)

__all__ = [
    "NODE_DTYPE",
    "GGUFFormatError",
    "TokenTrie",
    "TokenizerError",
    "UnsupportedTokenizerError",
    "Vocabulary",
    "VocabularyIncompleteWarning",
    "VocabularyWarning",
    "get_token_trie",
]
