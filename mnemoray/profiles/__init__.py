"""User profiles and per-app domain indexes (docs/profiles.md).

Both are derived views of one committed store version: computed from the snapshot's
live memories (and its entity graph where the store keeps one) on first read and kept
with that snapshot, so every commit (a backfill on either engine, an online ingestion,
a forget) changes them and nothing forgotten lingers.
"""

from mnemoray.compiler.services import ProfileSource
from mnemoray.profiles.domain import DomainIndex, PeriodCoverage, TopicCoverage
from mnemoray.profiles.profile import ExpertiseArea, UserProfile, UserTopics
from mnemoray.profiles.reads import ProfileReads
from mnemoray.profiles.style import CommunicationStyle, DeclinedTopic

__all__ = [
    "CommunicationStyle",
    "DeclinedTopic",
    "DomainIndex",
    "ExpertiseArea",
    "PeriodCoverage",
    "ProfileReads",
    "ProfileSource",
    "TopicCoverage",
    "UserProfile",
    "UserTopics",
]
