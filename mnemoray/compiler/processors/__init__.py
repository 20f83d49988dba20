"""The built-in processors, one per module, and their default order."""

from __future__ import annotations

from mnemoray.compiler.context import Processor
from mnemoray.compiler.processors.artifacts import ArtifactsProcessor
from mnemoray.compiler.processors.history import HistoryProcessor
from mnemoray.compiler.processors.identity import IdentityProcessor
from mnemoray.compiler.processors.instruction import InstructionProcessor
from mnemoray.compiler.processors.memory_preload import MemoryPreloadProcessor
from mnemoray.compiler.processors.static_instruction import StaticInstructionProcessor
from mnemoray.compiler.processors.token_budget import TokenBudgetProcessor


def default_processors() -> list[Processor]:
    """Static prefix first (cacheable), dynamic blocks after it, history,
    recall and artifacts, and the budget last so it sees everything."""
    return [
        StaticInstructionProcessor(),
        InstructionProcessor(),
        IdentityProcessor(),
        HistoryProcessor(),
        MemoryPreloadProcessor(),
        ArtifactsProcessor(),
        TokenBudgetProcessor(),
    ]


__all__ = [
    "ArtifactsProcessor",
    "HistoryProcessor",
    "IdentityProcessor",
    "InstructionProcessor",
    "MemoryPreloadProcessor",
    "StaticInstructionProcessor",
    "TokenBudgetProcessor",
    "default_processors",
]
