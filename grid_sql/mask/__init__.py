"""Token masks over real LLM vocabularies: byte spellings and the token trie (paper §2, §4.1)."""

from grid_sql.mask.cache import MaskCache, MaskEntry, MaskKey
from grid_sql.mask.guide import Guide, Matcher, bitmask_to_ids, ids_to_bitmask
from grid_sql.mask.logits import apply_token_bitmask_inplace
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
    "Guide",
    "MaskCache",
    "MaskEntry",
    "MaskKey",
    "Matcher",
    "apply_token_bitmask_inplace",
    "bitmask_to_ids",
    "ids_to_bitmask",
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
