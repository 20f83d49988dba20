"""UserGraph keeps the set of sessions it holds evidence of across add_session calls;
the graphs it builds are those of the per-call rebuild it replaced, row for row, with
sessions added again and sessions that hold nothing."""

from __future__ import annotations

from benchmarks.datagen import DatasetConfig, generate
from mnemoray.graph.extract import extract_session
from mnemoray.graph.graph import UserGraph
from mnemoray.memory.records.distill import distill_session
from mnemoray.memory.store.graph.tables import shard_tables
from mnemoray.sessions.session import Session
from mnemoray.summarizers import get_summarizer


class Rebuilt(UserGraph):
    """The reference: which sessions it holds, read from the whole graph each time."""

    def _merge(self, ex):  # type: ignore[no-untyped-def]
        self._held = None
        super()._merge(ex)


def _rows(graph: UserGraph) -> dict[str, list[dict]]:
    return {t: table.to_pylist() for t, table in shard_tables([graph]).items()}


def test_graph_equals_the_per_call_rebuild() -> None:
    sessions = generate(DatasetConfig(users=1, sessions_per_user=60)).sessions
    summarizer = get_summarizer("extractive")
    extracts = [extract_session(s, distill_session(s, summarizer)) for s in sessions]
    first = sessions[0]
    empty = Session(first.app_name, first.user_id, "nothing-said")
    extracts.append(extract_session(empty, []))
    # Added again: a session already held (its evidence replaced) and the empty one.
    order = [*extracts, extracts[3], extracts[-1], extracts[10], extracts[-1]]
    kept, rebuilt = UserGraph(first.app_name, first.user_id), Rebuilt(first.app_name, first.user_id)
    for ex in order:
        kept.add_session(ex)
        rebuilt.add_session(ex)
        assert kept._held == kept.sessions()  # exactly the sessions held, never more
    assert _rows(kept) == _rows(rebuilt)
    assert len(kept.relations) > 200 and "nothing-said" not in kept.sessions()
    assert kept.forget_session(sessions[5].session_id)
    rebuilt.forget_session(sessions[5].session_id)
    kept.add_session(extracts[5])
    rebuilt.add_session(extracts[5])
    assert _rows(kept) == _rows(rebuilt)
