"""The built-in processors, one per module, and their default order."""

from __future__ import annotations

from mnemoray.compiler.context import Processor
from mnemoray.compiler.prefix_reuse import PrefixReuse
from mnemoray.compiler.processors.artifacts import ArtifactsProcessor
from mnemoray.compiler.processors.history import HistoryProcessor
from mnemoray.compiler.processors.identity import IdentityProcessor
from mnemoray.compiler.processors.instruction import InstructionProcessor
from mnemoray.compiler.processors.memory_preload import MemoryPreloadProcessor
from mnemoray.compiler.processors.static_instruction import StaticInstructionProcessor
from mnemoray.compiler.processors.token_budget import TokenBudgetProcessor
from mnemoray.compiler.processors.tool_results import ToolResultsProcessor
from mnemoray.compiler.processors.user_profile import UserProfileProcessor


def default_processors() -> list[Processor]:
    """The stable layout: the system instruction's blocks from the least to the most
    changing (static instruction, identity, the user profile, which changes once per
    session, then the state-templated instruction), so a change of state leaves the
    blocks before it cacheable; then history (old tool results summarized), recalled
    memories (just before the new message by default) and artifacts, and the budget
    last so it sees everything. The prefix-reuse tracker lives as long as the pipeline."""
    return [
        StaticInstructionProcessor(PrefixReuse()),
        IdentityProcessor(),
        UserProfileProcessor(),
        InstructionProcessor(),
        HistoryProcessor(),
        ToolResultsProcessor(),
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
    "ToolResultsProcessor",
    "UserProfileProcessor",
    "default_processors",
]
