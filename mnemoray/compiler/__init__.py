"""The context compiler: session + memory + artifacts -> one model request."""

from mnemoray.compiler.agent import AgentSpec, IncludeContents, MemoryPlacement
from mnemoray.compiler.callee import Callee
from mnemoray.compiler.compiler import Compiler, UnknownProcessorError
from mnemoray.compiler.context import CompileContext, Processor, prefix_hash, text_content
from mnemoray.compiler.prefix_reuse import PrefixReuse
from mnemoray.compiler.processors import (
    ArtifactsProcessor,
    HistoryProcessor,
    IdentityProcessor,
    InstructionProcessor,
    MemoryPreloadProcessor,
    StaticInstructionProcessor,
    TokenBudgetProcessor,
    ToolResultsProcessor,
    default_processors,
)
from mnemoray.compiler.request import (
    CompiledRequest,
    Content,
    FunctionCall,
    FunctionResponse,
    Part,
    StepError,
    TraceStep,
)
from mnemoray.compiler.services import MemorySearch, MemorySnippet, Services
from mnemoray.compiler.template import TemplateError, render_template
from mnemoray.compiler.tools import LOAD_ARTIFACTS_TOOL, LOAD_MEMORY_TOOL

__all__ = [
    "AgentSpec",
    "ArtifactsProcessor",
    "Callee",
    "CompileContext",
    "CompiledRequest",
    "Compiler",
    "Content",
    "FunctionCall",
    "FunctionResponse",
    "HistoryProcessor",
    "IdentityProcessor",
    "IncludeContents",
    "InstructionProcessor",
    "LOAD_ARTIFACTS_TOOL",
    "LOAD_MEMORY_TOOL",
    "MemoryPlacement",
    "MemoryPreloadProcessor",
    "MemorySearch",
    "MemorySnippet",
    "Part",
    "PrefixReuse",
    "Processor",
    "Services",
    "StaticInstructionProcessor",
    "StepError",
    "TemplateError",
    "TokenBudgetProcessor",
    "ToolResultsProcessor",
    "TraceStep",
    "UnknownProcessorError",
    "default_processors",
    "prefix_hash",
    "render_template",
    "text_content",
]
