"""The Asker turns scope-aware lexicons on when the role has a column lexicon."""

from __future__ import annotations

import shutil
from pathlib import Path

from grid_sql.ask.asker import Asker
from grid_sql.parser import ParserRuntime

from .helpers import CHINOOK


def test_asker_scopes_on_by_default_and_off_on_request(tmp_path: Path) -> None:
    db = tmp_path / "chinook.sqlite"
    shutil.copy(CHINOOK, db)
    on = Asker(db, audit=False)
    off = Asker(db, audit=False, scopes=False)
    assert on.grammar.scopes is not None and off.grammar.scopes is None
    q = b"SELECT * FROM Invoice AS i WHERE i.FirstName = 'x'"  # FirstName is Customer's
    rt_on, rt_off = ParserRuntime.for_grammar(on.grammar), ParserRuntime.for_grammar(off.grammar)
    assert rt_on.advance(rt_on.initial, q) is None
    assert rt_off.advance(rt_off.initial, q) is not None
