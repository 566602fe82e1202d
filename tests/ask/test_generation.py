"""The Asker's generation strategy (issue #24 §2): who generates is an object the Asker is
given, so the remote path plugs one in instead of overriding the Asker's private hooks."""

from __future__ import annotations

from grid_sql.ask.asker import Asker
from grid_sql.ask.generation import GenerationStrategy
from grid_sql.ask.local import LocalGeneration
from grid_sql.serve.client import RemoteAsker, ServerClient, ServerGeneration


def test_remote_asker_overrides_no_private_hook_of_the_asker() -> None:
    private = {
        n
        for n in vars(RemoteAsker)
        if n.startswith("_") and not n.startswith("__") and hasattr(Asker, n)
    }
    assert private == set()


def test_both_paths_are_strategies_and_say_how_they_seal() -> None:
    assert issubclass(LocalGeneration, GenerationStrategy)
    server = ServerGeneration(ServerClient("http://127.0.0.1:9/v1"), mode="server-grammar")
    assert isinstance(server, GenerationStrategy)
    assert (LocalGeneration.seal_mode, server.seal_mode) == ("loop", "processor")
    assert server.seal_flags == ("remote-replay", "remote:server-grammar")
    assert server.prompt_backend(load=True) is None  # the prompt is bounded by bytes


def test_an_asker_generates_locally_by_default(chinook_copy) -> None:
    asker = Asker(chinook_copy, audit=False)
    assert isinstance(asker.generation, LocalGeneration)
    assert asker.generation.prompt_backend(load=False) is None  # the model is not loaded yet
