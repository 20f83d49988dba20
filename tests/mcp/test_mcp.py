"""`mnemoray mcp` driven by the official SDK's own client: stdio, streamable HTTP, --url.

Every case spawns the real command (``python -m mnemoray.cli mcp ...``) and talks MCP to it;
the --url case runs the HTTP API (build_api over a real MemoryService) on uvicorn.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from typer.testing import CliRunner

from mnemoray.cli.main import app
from mnemoray.client import MnemorayClient
from mnemoray.http.app import build_api
from mnemoray.http.auth import ApiKeys
from mnemoray.http.backend import HttpConfig
from mnemoray.memory.records.record import Memory
from mnemoray.memory.service.service import MemoryService
from mnemoray.sessions.events import user_message
from mnemoray.sessions.sqlite.store import SQLiteSessionStore
from tests.support.factories import T0, parrot
from tests.support.service_backend import ServiceBackend

ROOT = Path(__file__).resolve().parents[2]
APP, USER = "shop", "ana"
TOOLS = {"recall", "remember", "forget", "compile_context"}
Session = Callable[[ClientSession], Awaitable[Any]]


def mcp_args(*args: str) -> list[str]:
    return ["-m", "mnemoray.cli", "mcp", "--app", APP, "--user", USER, *args]


def run_stdio(body: Session, *args: str, env: dict[str, str] | None = None) -> Any:
    """Spawn `mnemoray mcp ARGS` and run ``body`` on an initialized SDK session."""
    params = StdioServerParameters(command=sys.executable, args=mcp_args(*args), cwd=ROOT, env=env)

    async def main() -> Any:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            return await body(s)

    return anyio.run(main)


async def call(s: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await s.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


async def error(s: ClientSession, tool: str, **arguments: Any) -> str:
    """The text of a tool error: one line, no traceback."""
    result = await s.call_tool(tool, arguments)
    assert result.is_error, result.content
    text = result.content[0].text
    assert "\n" not in text and "Traceback" not in text, text
    return text


async def read(s: ClientSession, uri: str) -> Any:
    return json.loads((await s.read_resource(uri)).contents[0].text)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(
    port: int, proc: subprocess.Popen[str] | None = None, timeout_s: float = 60.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"server exited: {proc.communicate()[1]}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"nothing listens on port {port}")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store holding one memory of another user of the app (never to be seen) and a
    stored session of ana's for compile_context."""
    root = tmp_path / "store"
    service = MemoryService.open(root)
    service.add_memories(
        [Memory(APP, "bob", "online", "fact", "Bob's window seat booking code is ZX81.")]
    )
    service.close()
    with SQLiteSessionStore(root / "sessions.db") as sessions:
        s = sessions.create_session(APP, USER, "trip")
        sessions.append_events(
            s, [user_message("Book me a flight to Lisbon in May.", timestamp=T0)]
        )
    return root


# -- stdio, local store ------------------------------------------------------------------
def test_stdio_round_trip_on_a_local_store(store: Path) -> None:
    base = f"mnemoray://users/{APP}/{USER}"

    async def body(s: ClientSession) -> None:
        tools = (await s.list_tools()).tools
        assert {t.name for t in tools} == TOOLS
        for tool in tools:  # the tenant is the server's, never an argument
            assert not {"app_name", "user_id"} & set(tool.input_schema["properties"])
        assert {str(r.uri) for r in (await s.list_resources()).resources} == {
            f"{base}/memories",
            f"{base}/profile",
        }
        added = await call(
            s,
            "remember",
            memories=[
                "Ana always books a window seat.",
                {"text": "Ana is allergic to peanuts.", "topics": ["health"]},
            ],
        )
        assert added["added"] == 2 and added["status"] == "added"
        again = await call(s, "remember", memories=["Ana always books a window seat."])
        assert again["added"] == 0 and again["duplicates"] == 1
        session = parrot(user=USER, app=APP).to_dict()
        distilled = await call(s, "remember", session=session)
        assert distilled["added"] >= 1
        assert {m["kind"] for m in distilled["memories"]} >= {"session_summary"}

        found = (await call(s, "recall", query="which seat does she like?"))["memories"]
        assert found[0]["text"] == "Ana always books a window seat."
        assert all("ZX81" not in m["text"] for m in found)  # bob's memory stays bob's
        parrot_hits = await call(
            s, "recall", query="parrot", top_k=3, filters={"session_id": "parrot"}
        )
        assert parrot_hits["memories"] and all(
            m["provenance"]["session_id"] == "parrot" for m in parrot_hits["memories"]
        )

        profile = await read(s, f"{base}/profile")
        assert profile["memories"] == 2 + distilled["added"] and profile["complete"]
        assert profile["by_kind"]["fact"] >= 2 and profile["sessions"] == 2
        assert "Ana is allergic to peanuts." in [f["text"] for f in profile["recent_facts"]]
        page = await read(s, f"{base}/memories")
        assert len(page["memories"]) == profile["memories"] and page["next_cursor"] is None

        seat = found[0]["memory_id"]
        assert (await call(s, "forget", memory_id=seat)) == {"forgotten": 1, "memory_ids": [seat]}
        assert "no live memory" in await error(s, "forget", memory_id=seat)
        preview = await call(s, "forget", query="peanuts allergy", dry_run=True, top_k=1)
        assert [m["text"] for m in preview["memories"]] == ["Ana is allergic to peanuts."]
        still = await call(s, "recall", query="peanuts")
        assert preview["memory_ids"][0] in [m["memory_id"] for m in still["memories"]]
        done = await call(s, "forget", confirm=preview["confirm_token"])
        assert done == {"forgotten": 1, "memory_ids": preview["memory_ids"]}
        left = await call(s, "recall", query="peanuts window seat", top_k=20)
        assert {m["memory_id"] for m in left["memories"]}.isdisjoint({seat, *preview["memory_ids"]})

    run_stdio(body, "--store", str(store))
    # The forgets are on disk, for any other process: bob's memory is untouched.
    service = MemoryService.open(store)
    texts = {m.text for m in service.snapshot().rows_for_user(APP, USER)}
    assert "Ana always books a window seat." not in texts
    assert "Ana is allergic to peanuts." not in texts
    assert [m.text for m in service.snapshot().rows_for_user(APP, "bob")] == [
        "Bob's window seat booking code is ZX81."
    ]


def test_forget_everything_is_offered_only_when_allowed_and_takes_two_calls(
    store: Path,
) -> None:
    async def body(s: ClientSession) -> None:
        assert {t.name for t in (await s.list_tools()).tools} == TOOLS | {"forget_everything"}
        await call(s, "remember", memories=["Ana is allergic to peanuts."])
        first = await call(s, "forget_everything")
        assert first["erased"] is False and "ana" in first["erases"]
        assert (await call(s, "recall", query="peanuts"))["memories"]  # nothing removed yet
        assert "confirm:" in await error(s, "forget_everything", confirm="0" * 32)
        done = await call(
            s, "forget_everything", confirm=first["confirm_token"], reason="user asked"
        )
        assert done["erased"] is True and (done["app_name"], done["user_id"]) == (APP, USER)
        assert done["removed"]["sessions"] == 1 and done["removed"]["memories"] == 1
        assert (await call(s, "recall", query="peanuts"))["memories"] == []
        again = await call(s, "forget_everything", confirm=first["confirm_token"])
        assert set(again["removed"].values()) == {0}

    run_stdio(body, "--store", str(store), "--allow-erase")
    with SQLiteSessionStore(store / "sessions.db") as sessions:
        assert sessions.list_sessions(APP, USER) == []
    service = MemoryService.open(store)
    try:  # the other user of the app is untouched
        assert [m.text for m in service.list_memories(APP, "bob")[0]] == [
            "Bob's window seat booking code is ZX81."
        ]
    finally:
        service.close()


def test_compile_context_and_one_line_tool_errors(store: Path) -> None:
    async def body(s: ClientSession) -> None:
        await call(s, "remember", memories=["Ana prefers aisle seats on short flights."])
        out = await call(
            s,
            "compile_context",
            session_id="trip",
            new_message="Any seat?",
            agent={
                "name": "travel",
                "static_instruction": "You book trips.",
                "memory_preload": True,
            },
        )
        assert out["system_instruction"].startswith("You book trips.")
        texts = [p.get("text") for c in out["contents"] for p in c["parts"]]
        assert "Book me a flight to Lisbon in May." in texts and texts[-1] == "Any seat?"
        # The memories go just before the new message (the default placement).
        assert "Ana prefers aisle seats on short flights." in texts[-2]
        assert out["total_tokens"] > 0
        # An agent that opts in gets the user's profile (the service's own profile reads).
        assert "<user_profile>" not in out["system_instruction"]
        profiled = await call(
            s, "compile_context", session_id="trip", agent={"name": "travel", "user_profile": True}
        )
        assert "<user_profile>" in profiled["system_instruction"]

        assert "top_k: Input should be greater than or equal to 1" in await error(
            s, "recall", query="seat", top_k=0
        )
        assert "session.user_id" in await error(
            s, "remember", session={**parrot(user="bob", app=APP).to_dict()}
        )
        assert "memories: pass exactly one" in await error(s, "remember")
        assert "memories.1.kind: Input should be" in await error(
            s, "remember", memories=["fine", {"text": "t", "kind": "bogus"}]
        )
        assert "query: pass memory_id" in await error(s, "forget")
        assert "confirm:" in await error(s, "forget", confirm="forged.token")
        assert "session not found" in await error(
            s, "compile_context", session_id="nope", agent={"name": "a"}
        )
        assert "agent.instruction" in await error(
            s, "compile_context", session_id="trip", agent={"name": "a", "instruction": "{missing}"}
        )

    run_stdio(body, "--store", str(store))


def test_usage_errors_exit_2_in_one_line(store: Path, tmp_path: Path) -> None:
    for args, flag in (
        (["--http", "--host", "0.0.0.0", "--store", str(tmp_path)], "--host"),
        ([], "--store / --url"),
        # The store embeds: a keyword-only server could not write to it.
        (["--store", str(store), "--embedder", "none"], "embedder"),
        (["--store", str(tmp_path), "--api-key", "k"], "--api-key"),
    ):
        result = CliRunner().invoke(app, mcp_args(*args)[2:])
        assert result.exit_code == 2 and flag in result.output, result.output
        assert "Traceback" not in result.output


# -- streamable HTTP -----------------------------------------------------------------------
def test_streamable_http(store: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, *mcp_args("--store", str(store), "--http", "--port", str(port))],
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_port(port, proc)

        async def main() -> None:
            async with (
                streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (r, w),
                ClientSession(r, w) as s,
            ):
                await s.initialize()
                assert {t.name for t in (await s.list_tools()).tools} == TOOLS
                await call(s, "remember", memories=["Ana's favourite city is Porto."])
                found = await call(s, "recall", query="favourite city")
                assert found["memories"][0]["text"] == "Ana's favourite city is Porto."
                # More memories than one read of the resource holds: it pages by cursor.
                many = [f"Ana's note number {i}." for i in range(210)]
                assert (await call(s, "remember", memories=many))["added"] == 210
                base = f"mnemoray://users/{APP}/{USER}"
                templates = (await s.list_resource_templates()).resource_templates
                assert [t.uri_template for t in templates] == [f"{base}/memories{{?cursor}}"]
                first = await read(s, f"{base}/memories")
                rest = await read(s, f"{base}/memories?cursor={first['next_cursor']}")
                assert len(first["memories"]) == 200 and rest["next_cursor"] is None
                ids = [m["memory_id"] for m in first["memories"] + rest["memories"]]
                assert len(set(ids)) == 211
                profile = await read(s, f"{base}/profile")
                assert profile["by_kind"] == {"fact": 211} and profile["memories"] == 211

        anyio.run(main)
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


# -- --url: a running HTTP API -------------------------------------------------------------
@contextmanager
def http_api(root: Path, key: str) -> Iterator[str]:
    """The HTTP API (build_api over a real MemoryService, as a replica wires it) on
    uvicorn in this process, with one API key for the app."""
    backend = ServiceBackend(MemoryService.open(root))
    api = build_api(
        backend,  # type: ignore[arg-type]
        HttpConfig(keys=ApiKeys.from_mapping({key: APP})),
    )
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(api, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        backend.service.close()


def test_url_backend_against_a_running_server(tmp_path: Path) -> None:
    key = "mcp-test-key-0123456789"
    with http_api(tmp_path / "served", key) as url:
        with MnemorayClient(url, key) as client:
            client.create_session(APP, USER, "trip")
            client.append_events(
                APP, USER, "trip", [user_message("Find me a hotel in Lisbon.", timestamp=T0)]
            )

        async def body(s: ClientSession) -> None:
            await call(s, "remember", memories=["Ana likes hotels with a gym."])
            distilled = await call(s, "remember", session=parrot(user=USER, app=APP).to_dict())
            assert distilled["added"] >= 1 and distilled["status"] == "added"
            found = await call(s, "recall", query="hotel gym")
            assert found["memories"][0]["text"] == "Ana likes hotels with a gym."
            preview = await call(s, "forget", query="hotel gym", dry_run=True, top_k=1)
            assert preview["memory_ids"] == [found["memories"][0]["memory_id"]]
            assert (await call(s, "forget", confirm=preview["confirm_token"]))["forgotten"] == 1
            left = (await call(s, "recall", query="hotel gym", top_k=20))["memories"]
            assert preview["memory_ids"][0] not in [m["memory_id"] for m in left]
            assert "Ana likes hotels with a gym." not in [m["text"] for m in left]
            out = await call(
                s,
                "compile_context",
                session_id="trip",
                agent={"name": "travel", "static_instruction": "You book."},
            )
            texts = [p.get("text") for c in out["contents"] for p in c["parts"]]
            assert "Find me a hotel in Lisbon." in texts
            assert "top_k" in await error(s, "recall", query="x", top_k=1000)

        # The key from the environment, as an MCP client's config would pass it.
        run_stdio(body, "--url", url, env={"MNEMORAY_API_KEY": key})

        async def wrong_key(s: ClientSession) -> None:
            assert "HTTP 401" in await error(s, "recall", query="hotel")

        run_stdio(wrong_key, "--url", url, "--api-key", "not-the-key-0123456789")

        async def erase(s: ClientSession) -> None:
            token = (await call(s, "forget_everything"))["confirm_token"]
            done = await call(s, "forget_everything", confirm=token)
            assert done["erased"] is True and done["removed"]["sessions"] == 1
            assert (await call(s, "recall", query="parrot"))["memories"] == []

        run_stdio(erase, "--url", url, "--api-key", key, "--allow-erase")
        with MnemorayClient(url, key) as client:
            assert client.list_sessions(APP, USER) == []


def test_url_backend_unreachable_is_one_line() -> None:
    async def body(s: ClientSession) -> None:
        text = await error(s, "recall", query="anything")
        assert "cannot reach the mnemoray server at http://127.0.0.1:" in text

    run_stdio(body, "--url", f"http://127.0.0.1:{free_port()}")
