"""The Ray Data backfill: same memories as the in-process path, exact counts, idempotent."""

from __future__ import annotations

import importlib.util
import io
import json
import pickle
import re
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from mnemoray.backfill import BackfillConfig, RayOptions, backfill
from mnemoray.backfill.archive import write_archive
from mnemoray.backfill.steps import SessionItem
from mnemoray.cli.main import app
from mnemoray.embedders import PACKAGED_MODEL_ID, open_embedder
from mnemoray.memory.records.distill import distill_session, summary_inputs
from mnemoray.memory.store.parquet.store import MemoryStore
from mnemoray.memory.store.runs import read_run_reports
from mnemoray.memory.store.writes import session_content_hash
from mnemoray.pipeline.backfill import RayDataEngine
from mnemoray.pipeline.llm import FinishDistill, PlanPrompts, require_vllm
from mnemoray.pipeline.rows import ITEM, STATS, pack, unpack
from mnemoray.summarizers.llm_base import Completion, LLMSummarizer
from mnemoray.summarizers.llm_prompt import build_messages, build_prompt
from tests.support.archive_gen import make_archive, make_session

SESSIONS = 10


def live(store_dir: Path) -> dict[tuple[str, str], np.ndarray | None]:
    """(session_id, content_hash) -> embedding of every live memory; each pair once."""
    out: dict[tuple[str, str], np.ndarray | None] = {}
    for m in MemoryStore(store_dir).load().iter_memories():
        key = (m.session_id, m.content_hash)
        assert key not in out, f"memory stored twice: {key}"
        out[key] = m.embedding
    return out


def grown_archive(root: Path) -> int:
    """The generated archive, plus a session archived twice (the later copy grew)."""
    bad = make_archive(root, SESSIONS, files=3)
    full = make_session(900, turns=8)
    short = make_session(900, turns=2)
    write_archive([short], root / "a-grown-1.jsonl")  # read first
    write_archive([full], root / "z-grown-2.jsonl")  # read last, in another chunk
    return bad


@pytest.mark.ray
def test_ray_backfill_matches_in_process_and_reruns_to_nothing(
    tmp_path: Path, ray_cluster: None
) -> None:
    archive = tmp_path / "archive"
    bad = grown_archive(archive)
    rows = SESSIONS + 2 + bad
    # Content hashes do not depend on the embedder: the reference runs keyword-only.
    reference = backfill(
        BackfillConfig(archive, tmp_path / "inproc", shards=2, commit_every=4, embedder=None)
    )

    stream = io.StringIO()
    cfg = BackfillConfig(
        archive=str(archive),
        store=str(tmp_path / "ray"),
        shards=2,
        commit_every=5,
        progress_interval_s=0.0,
        ray=RayOptions(batch_size=4),
    )
    run = backfill(cfg, RayDataEngine(), stream=stream, tty=False)

    assert (
        (run.sessions_read, run.skipped, run.quarantined, run.memories_written)
        == (
            reference.sessions_read,
            reference.skipped,
            reference.quarantined,
            reference.memories_written,
        )
        == (rows, 0, bad, reference.memories_written)
    )
    assert run.commits >= 3  # committed in chunks, not once at the end
    ours, theirs = live(tmp_path / "ray"), live(tmp_path / "inproc")
    assert set(ours) == set(theirs) and len(ours) >= SESSIONS * 3
    # The actors embedded with the very model the in-process path loads.
    sample = list(MemoryStore(tmp_path / "ray").load().iter_memories())[:8]
    expected = open_embedder("default").encode([m.key_text for m in sample])
    assert np.allclose(np.stack([m.embedding for m in sample]), expected, atol=1e-5)
    assert MemoryStore(tmp_path / "ray").manifest().embedding_model == PACKAGED_MODEL_ID
    # The grown session keeps one summary, the newer one (superseded on the driver).
    summaries = [
        m
        for m in MemoryStore(tmp_path / "ray").load().iter_memories(user="u0", app="app")
        if m.session_id == "s0900" and m.kind == "session_summary"
    ]
    assert len(summaries) == 1

    store = MemoryStore(tmp_path / "ray")
    assert store.quarantine_count() == bad
    assert {q["location"] for q in store.read_quarantine()} == {
        q["location"] for q in MemoryStore(tmp_path / "inproc").read_quarantine()
    }
    assert store.manifest().ledger_sessions == SESSIONS + 2
    assert store.manifest().summarizer == "extractive"

    lines = stream.getvalue().splitlines()
    assert lines and all("sessions/s" in line for line in lines)
    assert "ETA" in lines[0] and f"{rows}/{rows} sessions (100.0%)" in lines[-1]
    (report,) = read_run_reports(store.root)
    assert report["status"] == "succeeded" and report["engine"] == "ray_data"
    assert report["counts"]["sessions_read"] == rows
    assert report["counts"]["memories_written"] == run.memories_written
    assert report["throughput"]["sessions_per_s"] > 0
    assert {"read", "validate", "distill", "embed", "write", "commit"} <= set(
        report["stage_seconds"]
    )
    # The workers' CPU seconds reach the driver's report, stage by stage.
    assert (
        set(report["stage_cpu_seconds"])
        == set(report["stage_seconds"])
        == set(run.stage_cpu_seconds)
    )
    assert run.stage_cpu_seconds["distill"] > 0 and run.stage_cpu_seconds["embed"] > 0
    # --workers not given: sized from the test cluster's 2 CPUs, and the report says so.
    assert run.resolved == report["resolved"] == {"workers": 1}
    assert report["config"]["commit_every"] == 5 and Path(run.report_path).is_file()

    # Re-run: everything is in the ledger; nothing is added, bad rows counted once.
    again = backfill(cfg, RayDataEngine(), stream=io.StringIO(), tty=False)
    assert (again.sessions_read, again.skipped, again.quarantined, again.memories_written) == (
        rows,
        SESSIONS + 2,
        bad,
        0,
    )
    assert live(tmp_path / "ray").keys() == ours.keys()
    assert store.quarantine_count() == bad
    assert len(read_run_reports(store.root)) == 2


@pytest.mark.ray
def test_cli_backfill_flags_and_in_process_rerun(tmp_path: Path, ray_cluster: None) -> None:
    archive = tmp_path / "archive"
    make_archive(archive, 6, files=2, bad=False, parquet=False)
    runner = CliRunner()
    args = [
        "backfill",
        "--archive",
        str(archive),
        "--store",
        str(tmp_path / "store"),
        "--embedder",
        "none",
        "--commit-every",
        "3",
        "--json",
    ]
    # Chunks hold exactly --commit-every sessions when it is a multiple of --batch-size.
    result = runner.invoke(app, [*args, "--workers", "1", "--batch-size", "3"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["sessions_read"], report["quarantined"], report["commits"]) == (6, 0, 2)
    assert report["memories_written"] > 6
    # The in-process path reads the same ledger keys: nothing to redo.
    result = runner.invoke(app, [*args, "--in-process"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["skipped"], report["memories_written"]) == (6, 0)
    assert [r["engine"] for r in read_run_reports(tmp_path / "store")] == ["ray_data", "in_process"]


# -- the vLLM batch path (no GPU, no vLLM here: its pieces run without the engine) ---------
class CannedLLM(LLMSummarizer):
    """The in-process LLM backend path with a fixed model output."""

    name = "vllm"

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.max_tokens = 512

    def _complete(self, batches):
        return [Completion(self.text) for _ in batches]


class PlainTokenizer:
    chat_template = None

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return [len(w) for w in text.split()]


class ChatTokenizer(PlainTokenizer):
    chat_template = "{{ messages }}"

    def apply_chat_template(self, messages, tokenize: bool, add_generation_prompt: bool) -> str:
        assert not tokenize and add_generation_prompt
        return "<chat>" + json.dumps(messages) + "<assistant>"


def _items(*sessions) -> list[SessionItem]:
    return [
        SessionItem(f"x.jsonl:{i}", session_content_hash(s), s, s.to_dict())
        for i, s in enumerate(sessions)
    ]


def test_vllm_prompts_use_the_shared_prompt_code() -> None:
    session = make_session(3)
    events = summary_inputs(session)
    assert events  # a session with messages is summarized
    out = PlanPrompts("m", tokenizer=PlainTokenizer())(pack(_items(session)))
    assert out.column("prompt").to_pylist() == [build_prompt(events)]
    assert out.column("llm_needed").to_pylist() == [True]
    empty = PlanPrompts("m", tokenizer=PlainTokenizer())(pack([], [{"read": 3}]))
    assert empty.column("llm_needed").to_pylist() == [False]  # a tally-only row: no call
    assert "tokenized_prompt" not in out.column_names
    chat = PlanPrompts("m", tokenizer=ChatTokenizer())(pack(_items(session)))
    text = ChatTokenizer().apply_chat_template(
        build_messages(events), tokenize=False, add_generation_prompt=True
    )
    assert chat.column("prompt").to_pylist()[0] == text
    assert chat.column("tokenized_prompt").to_pylist()[0] == ChatTokenizer().encode(text)


def test_vllm_batch_output_gives_the_in_process_backends_records(tmp_path: Path) -> None:
    session = make_session(5)
    output = json.dumps(
        {
            "summary": "The user adopted a beagle named Max.",
            "topics": ["pets"],
            "entities": ["Max"],
            "open_threads": [],
            "key_facts": [{"text": "The user has a beagle named Max.", "events": [0]}],
        }
    )
    expected = distill_session(session, CannedLLM(output), now=1.0)
    planned = PlanPrompts("m", tokenizer=PlainTokenizer())(pack(_items(session)))
    # What the ray.data.llm postprocess hands on: the row plus the generated text.
    engine_out = (
        planned.select([ITEM, STATS, "llm_needed"])
        .append_column("completion", pa.array([output]))
        .append_column("num_generated_tokens", pa.array([40]))
    )
    finished = FinishDistill(str(tmp_path / "store"), 2, max_tokens=512)(engine_out)
    (item,), stats, _ = unpack(finished)
    got = [m.content_hash for m in item.memories]
    assert got == [m.content_hash for m in expected]
    assert item.memories[0].text == "The user adopted a beagle named Max."
    assert stats[0]["summarizer"] == "vllm" and stats[0]["quarantined"] == 0
    # Unparseable output: quarantined with the reason, as in process.
    broken = engine_out.set_column(
        engine_out.column_names.index("completion"), "completion", pa.array(["no json here"])
    )
    items, stats, _ = unpack(FinishDistill(str(tmp_path / "store"), 2, 512)(broken))
    assert items == [] and stats[0]["quarantined"] == 1
    (q,) = MemoryStore(tmp_path / "store").read_quarantine()
    assert "distill failed: SummaryParseError" in q["reason"]
    assert pickle.loads(
        pack(_items(session)).column(ITEM)[0].as_py()
    ).raw_hash == session_content_hash(session)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed")
def test_vllm_without_vllm_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="vLLM is not installed"):
        require_vllm()
    make_archive(tmp_path / "archive", 2, files=1, bad=False, parquet=False)
    result = CliRunner().invoke(
        app,
        [
            "backfill",
            "--archive",
            str(tmp_path / "archive"),
            "--store",
            str(tmp_path / "store"),
            "--summarizer",
            "vllm",
            "--summarizer-option",
            "model=/models/x",
            "--gpus-per-embedder",
            "1",
        ],
    )
    assert result.exit_code == 2 and "vLLM is not installed" in result.output
    assert not (tmp_path / "store" / "manifest.json").exists()


# -- commits stream: a chunk is committed while later sessions are still being distilled ----
class GatedLLM:
    """An OpenAI-compatible chat server whose answer for one session waits for a commit.

    Every window gets a small summary JSON naming its session. The request for the
    ``gate`` session is held until the store has committed at least one chunk (or
    ``wait_s`` passes): a backfill that commits only once the whole archive is distilled
    never gets past it in time.
    """

    def __init__(self, store: Path, gate: str, wait_s: float) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.store, self.gate, self.wait_s = store, gate, wait_s
        self.committed_at_gate: int | None = None  # sessions committed when the gate opened
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = body["messages"][0]["content"]
                if outer.gate in prompt and outer.committed_at_gate is None:
                    outer.committed_at_gate = outer.wait_for_commit()
                session = re.search(r"\(session (\d+)\)", prompt)
                text = json.dumps(
                    {
                        "summary": f"Talked about plans in session "
                        f"{session.group(1) if session else '?'}.",
                        "topics": ["plans"],
                    }
                )
                data = json.dumps(
                    {"choices": [{"message": {"content": text}, "finish_reason": "stop"}]}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def committed(self) -> int:
        if not (self.store / "manifest.json").exists():
            return 0
        return MemoryStore(self.store).manifest().ledger_sessions

    def wait_for_commit(self) -> int:
        deadline = time.monotonic() + self.wait_s
        while self.committed() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.committed()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> GatedLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.ray
def test_ray_backfill_commits_while_the_archive_is_still_being_distilled(
    tmp_path: Path, ray_cluster: None
) -> None:
    """One archive file; its second chunk is distilled only once the first is committed.

    A flow that carries a whole file as one block commits nothing before every
    session of the file is distilled; a driver that takes a chunk only once the next
    one is ready (a prefetching iterator) does not commit the first chunk before the
    second is distilled. Either waits at the gate with 0 sessions committed.
    """
    archive, store = tmp_path / "archive.jsonl", tmp_path / "store"
    sessions, every = 24, 4
    write_archive([make_session(i) for i in range(sessions)], archive)
    gate = f"(session {every})"  # the first session of the second chunk
    with GatedLLM(store, gate, wait_s=90.0) as llm:
        cfg = BackfillConfig(
            archive=str(archive),
            store=str(store),
            shards=2,
            commit_every=every,
            embedder=None,
            summarizer="openai",
            summarizer_options={
                "base_url": llm.url,
                "model": "stub",
                "timeout": 180.0,
                "max_retries": 0,
            },
            progress_interval_s=1e9,
            ray=RayOptions(batch_size=2, workers=1),
        )
        run = backfill(cfg, RayDataEngine(), stream=io.StringIO(), tty=False)
    assert llm.committed_at_gate is not None, "the gate session was never distilled"
    # The first chunk was committed while the second was being distilled.
    assert llm.committed_at_gate == every, llm.committed_at_gate
    assert run.sessions_committed == sessions and run.commits == sessions // every
    assert run.commit_timeline[0]["sessions"] == every
    assert MemoryStore(store).manifest().ledger_sessions == sessions
