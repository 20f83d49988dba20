"""A LongMemEval question in the data's own shape, small: three sessions, one id
repeated, dates out of order, one evidence turn."""

from __future__ import annotations

from typing import Any

EVIDENCE = "I adopted a beagle named Biscuit last week and she loves the park."

ITEM: dict[str, Any] = {
    "question_id": "q1",
    "question_type": "multi-session",
    "question": "What is the name of my dog?",
    "answer": "Biscuit",
    "question_date": "2023/05/30 (Tue) 10:18",
    "answer_session_ids": ["s_a"],
    "haystack_session_ids": ["s_a", "s_b", "s_a"],
    "haystack_dates": [
        "2023/05/01 (Mon) 10:00",
        "2023/04/01 (Sat) 09:00",
        "2023/04/15 (Sat) 12:00",
    ],
    "haystack_sessions": [
        [
            {"role": "user", "content": EVIDENCE, "has_answer": True},
            {"role": "assistant", "content": "Congratulations! Beagles need long walks."},
        ],
        [
            {"role": "user", "content": "Can you recommend a quick pasta recipe?"},
            {"role": "assistant", "content": "Try cacio e pepe: pasta, pecorino, pepper."},
        ],
        [
            {"role": "user", "content": "My sister Maya visits next month."},
            {"role": "assistant", "content": "How lovely! Any plans together?"},
        ],
    ],
}
