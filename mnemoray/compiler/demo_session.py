"""A long, realistic demo session: two agents, tools, artifacts, scoped state.

`mnemoray demo` builds it in the embedded default stores (SQLite sessions,
filesystem artifacts), compacts it, and prints the compiled context.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from mnemoray.artifacts.store import ArtifactStore
from mnemoray.compaction.compactor import CompactionConfig, Compactor
from mnemoray.compiler import AgentSpec, CompiledRequest, Compiler, Services
from mnemoray.sessions.events import Event, model_message, tool_call, tool_result, user_message
from mnemoray.sessions.session import Session
from mnemoray.sessions.store import SessionStore
from mnemoray.summarizers import get_summarizer
from mnemoray.tokens import count_tokens

APP = "travel_app"
USER = "maya"

CITIES = ["Lisbon", "Porto", "Kyoto", "Osaka", "Reykjavik", "Oslo", "Lima", "Cusco"]
USER_TURNS = [
    "I'm planning a two week trip in May, starting in {city}. I prefer trains over flights.",
    "What is the weather like in {city} in late May? I get cold easily.",
    "I'm vegetarian, so please keep that in mind for restaurant ideas in {city}.",
    "Can you find me a flight from {city} to {next_city} on May {day}?",
    "My budget is about 120 euros a night for hotels, ideally near the old town.",
    "Book the cheaper option and add it to my itinerary.",
    "What museums in {city} are open on Mondays?",
    "I have a bad knee, so nothing with too many stairs please.",
    "My sister Lena joins me in {city}; she loves street food and live music.",
    "Is there a day trip from {city} to the coast that works by train?",
    "I'd rather stay somewhere quiet in {city}, I sleep badly with street noise.",
    "Please remember I must be back in Berlin by the first of June for work.",
]

# The root agent's static instruction never changes: it opens the cacheable prefix.
TRAVEL_AGENT = AgentSpec(
    name="travel_agent",
    description="Plans trips and answers travel questions.",
    static_instruction=(
        "You are a careful travel planner. Always respect the traveller's stated "
        "preferences and constraints. Cite prices with their currency. When you need a "
        "past detail that is not in the conversation, call load_memory."
    ),
    instruction=(
        "Traveller: {user:name} (home city {user:home_city}). Current leg: {trip_leg?}. "
        "Itinerary so far: {artifact.itinerary.md}"
    ),
    tools=[
        {
            "name": "search_flights",
            "description": "Search flights between two cities",
            "parameters": {
                "type": "object",
                "properties": {
                    "origin": {"type": "string"},
                    "destination": {"type": "string"},
                    "date": {"type": "string"},
                },
                "required": ["origin", "destination"],
            },
        }
    ],
    token_budget=1500,
    # Its instruction already shows the itinerary, so of the compiler's tools it
    # needs only recall (the static instruction tells it to call load_memory).
    memory_tools=["load_memory"],
)

BOOKING_AGENT = AgentSpec(
    name="booking_agent",
    description="Books flights and hotels the travel agent picked.",
    static_instruction="You book travel. Confirm every booking's price and date before acting.",
    instruction="Book for {user:name}.",
    token_budget=1200,
    # It sees the itinerary through the artifact listing and loads it when it books.
    memory_tools=["load_artifacts"],
)


@dataclass
class DemoSession:
    session: Session
    turns: int
    compactions: int


def build_demo_session(
    store: SessionStore,
    artifacts: ArtifactStore,
    turns: int = 52,
    compactor: Compactor | None = None,
    start_ts: float = 1_767_225_600.0,
    user_id: str = USER,
) -> DemoSession:
    """Append ``turns`` user turns (each an invocation) with replies and tool use.

    With a ``compactor``, it runs after every invocation, as an agent runner
    would: a sliding window of summaries grows while the raw events stay.
    """
    compactions = 0
    session = store.create_session(
        APP, user_id, state={"user:name": user_id.capitalize(), "user:home_city": "Berlin"}
    )
    ts = start_ts
    legs: list[str] = []
    artifacts.save(
        APP,
        user_id,
        session.session_id,
        "itinerary.md",
        "# Itinerary\n",
        mime_type="text/markdown",
        summary="The trip itinerary, one line per leg",
    )

    def add(event: Event) -> None:
        nonlocal ts
        ts += 7.0
        store.append_event(session, event)

    for i in range(turns):
        inv = f"inv-{i:04d}"
        city, next_city = CITIES[(i // 6) % len(CITIES)], CITIES[(i // 6 + 1) % len(CITIES)]
        day = f"May {3 + i % 25}"
        text = USER_TURNS[i % len(USER_TURNS)].format(city=city, next_city=next_city, day=day[4:])
        add(
            user_message(
                text,
                invocation_id=inv,
                timestamp=ts,
                state_delta={"trip_leg": f"{city} -> {next_city}"},
            )
        )
        if "flight" in text:
            call = tool_call(
                "travel_agent",
                "search_flights",
                {"origin": city, "destination": next_city, "date": day},
                invocation_id=inv,
                timestamp=ts,
            )
            add(call)
            options = [
                {"carrier": "TAP", "price_eur": 89 + i},
                {"carrier": "Iberia", "price_eur": 112 + i},
            ]
            add(
                tool_result(
                    "travel_agent",
                    "search_flights",
                    {"options": options},
                    call.data["call_id"],
                    invocation_id=inv,
                    timestamp=ts,
                )
            )
            add(
                model_message(
                    "travel_agent",
                    f"I found two flights {city} to {next_city}: TAP at "
                    f"{89 + i} EUR and Iberia at {112 + i} EUR. Shall I book TAP?",
                    invocation_id=inv,
                    timestamp=ts,
                )
            )
        elif text.startswith("Book"):
            # Hand-off: the booking agent acts, the travel agent later sees it as narrative.
            add(
                model_message(
                    "booking_agent",
                    f"Booked TAP {city} to {next_city} for {89 + i} EUR, confirmation TP-{i:05d}.",
                    invocation_id=inv,
                    timestamp=ts,
                )
            )
            legs.append(f"- {city} -> {next_city}: TAP, {89 + i} EUR")
            version = artifacts.save(
                APP,
                user_id,
                session.session_id,
                "itinerary.md",
                "# Itinerary\n" + "\n".join(legs) + "\n",
                mime_type="text/markdown",
                summary="The trip itinerary, one line per leg",
            )
            add(
                model_message(
                    "booking_agent",
                    "Itinerary updated.",
                    invocation_id=inv,
                    timestamp=ts,
                    artifact_delta={"itinerary.md": version},
                )
            )
        else:
            add(model_message("travel_agent", _reply(text, city), invocation_id=inv, timestamp=ts))
        if compactor is not None and compactor.maybe_compact(store, session) is not None:
            compactions += 1
    return DemoSession(session=session, turns=turns, compactions=compactions)


def _reply(text: str, city: str) -> str:
    if "weather" in text:
        return f"Late May in {city} is mild, 16-22 C; pack a warm layer for evenings."
    if "vegetarian" in text:
        return f"Noted: vegetarian. {city} has good options near the market halls."
    if "budget" in text:
        return "Understood: about 120 EUR a night near the old town."
    if "museums" in text:
        return f"Most museums in {city} close on Mondays; the modern art museum stays open."
    if "knee" in text:
        return "I'll avoid routes with many stairs and pick step-free hotels."
    if "sister" in text:
        return f"Lovely. I'll add food markets and a music venue in {city} for you both."
    if "day trip" in text:
        return f"Yes: a regional train from {city} reaches the coast in about 90 minutes."
    if "quiet" in text:
        return f"I'll look for hotels on quiet side streets in {city}."
    if "June" in text:
        return "Noted: the trip must end in Berlin by June 1."
    return f"Great, {city} in May is a lovely start. Trains it is where possible."


def naive_tokens(session: Session, new_message: str) -> int:
    """The "append everything" baseline: every event's text and tool payload."""
    total = count_tokens(new_message)
    for e in session.events:
        total += count_tokens(e.text) + (count_tokens(json.dumps(e.data)) if e.data else 0)
    return total


def demo_compactor() -> Compactor:
    """Summarize every 8 invocations, re-including the last one of the previous window."""
    return Compactor(get_summarizer("extractive"), CompactionConfig(interval=8, overlap=1))


def compile_turn(
    session: Session, agent: AgentSpec, artifacts: ArtifactStore, message: str
) -> CompiledRequest:
    return Compiler.default().compile(session, agent, message, Services(artifacts=artifacts))
