"""The entity graph: ``GET /v1/graph/{app}/{user}`` (``MemoryService.neighbours``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class GraphRelationOut(BaseModel):
    relation_id: str
    type: str = Field(description="mentions, same_entity, lives_in, works_at, ...")
    src: str
    dst: str
    strength: float
    confidence: float
    valid_from: float | None = Field(description="world time it began to hold (epoch s)")
    valid_to: float | None = Field(description="world time it stopped holding (None: holds)")
    ended_by: str = Field(description="'' open, 'stated', or the id of the newer fact")
    evidence: str
    session_ids: list[str]


class GraphEntityOut(BaseModel):
    entity_id: str
    name: str
    type: str = Field(description="person, place, org, thing, date or period")
    aliases: list[str]
    mention_count: int
    first_seen: float | None
    last_seen: float | None
    speaker: bool


class GraphNeighbourOut(BaseModel):
    node_id: str
    kind: Literal["entity", "memory"]
    name: str = Field(description="the entity's name, or the start of the memory's text")
    type: str = Field(description="the entity's type, or the memory's kind")
    depth: int
    relation: GraphRelationOut = Field(description="the relation that reached this node")


class GraphResponse(BaseModel):
    app_name: str
    user_id: str
    entity: GraphEntityOut
    depth: int
    types: list[str] | None
    at: float | None
    facts: list[GraphRelationOut] = Field(description="the entity's facts holding now (or at `at`)")
    neighbours: list[GraphNeighbourOut] = Field(description="nearest first")
    took_ms: float | None = None
