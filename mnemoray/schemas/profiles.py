"""User profiles and domain indexes: ``GET /v1/profiles/{app}/{user}``
(``MemoryService.profile``) and ``GET /v1/domains/{app}`` (``MemoryService.domain``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class ExpertiseAreaOut(BaseModel):
    topic: str = Field(description="the word the user used most for it")
    term: str = Field(description="the keyword index's term (a stem)")
    depth: Literal["surface", "moderate", "expert"]
    mentions: int = Field(description="the user's turns naming it")
    sessions: int
    specific: int = Field(description="of those turns, the ones giving a number or a name")
    evidence: list[str] = Field(description="memory ids holding those turns, newest first")


class CommunicationStyleOut(BaseModel):
    turns: int
    words_per_turn: float
    verbosity: Literal["terse", "moderate", "verbose", "unknown"]
    question_ratio: float
    exclamation_ratio: float
    specifics_ratio: float = Field(description="turns giving a number or a name")
    formality: Literal["informal", "neutral", "formal", "unknown"]
    informal_markers: int
    formal_markers: int
    follow_ups_asked: int = Field(description="the other side's questions a user turn followed")
    follow_ups_answered: int


class DeclinedTopicOut(BaseModel):
    topic: str
    said: str = Field(description="the user's words (the start)")
    session_id: str
    day: str
    memory_ids: list[str]


class ProfileEntityOut(BaseModel):
    name: str
    type: str
    memories: int = Field(description="live memories mentioning it")


class ProfileResponse(BaseModel):
    app_name: str
    user_id: str
    store_version: int
    memories: int
    memory_kinds: dict[str, int]
    sessions: int
    first_active: float | None = Field(description="world time (epoch s)")
    last_active: float | None
    expertise: list[ExpertiseAreaOut]
    style: CommunicationStyleOut
    declined: list[DeclinedTopicOut]
    entities: list[ProfileEntityOut] = Field(
        description="people, places and things the user's memories mention (Parquet stores)"
    )
    took_ms: float | None = None


class TopicCoverageOut(BaseModel):
    topic: str
    term: str
    users: int
    sessions: int
    mentions: int
    first_month: str
    last_month: str


class PeriodCoverageOut(BaseModel):
    period: str = Field(description="YYYY-MM")
    memories: int
    sessions: int
    users: int


class CrossCuttingOut(BaseModel):
    topic: str
    term: str
    users: int


class EraOut(BaseModel):
    era: str = Field(description="a year (2023) or a decade (1990s)")
    memories: int
    users: int


class DomainResponse(BaseModel):
    app_name: str
    store_version: int
    users: int
    sessions: int
    memories: int
    topics: list[TopicCoverageOut] = Field(description="most covered first")
    well_covered: list[str]
    weakly_covered: list[str] = Field(description="named more than once, in one session only")
    cross_cutting: list[CrossCuttingOut] = Field(description="topics of two users or more")
    periods: list[PeriodCoverageOut] = Field(
        description="every month from the first memory to the last"
    )
    eras_mentioned: list[EraOut] = Field(
        description="years and decades the memories talk about (dates in the entity graph)"
    )
    took_ms: float | None = None
