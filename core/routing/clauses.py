"""Split a multi-intent prompt into its clauses, so each intent can find its own document.

"Show me today's stock trends and any news affecting them" needs a finance document and a news
document. Scored whole, the prompt's vector sits between the two and the second document rarely
clears the bar for a second hit; scored clause by clause, each intent is a plain single-intent prompt.
The split is deliberately plain (commas, semicolons, sentence ends, "and", "then", "as well as",
"also"): a clause must keep at least two content words, or it is not an intent of its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable

MAX_CLAUSES = 3  # each clause costs one embedding in the same model call as the prompt

_SPLIT = re.compile(
    r",\s*(?:and\s+|then\s+)?|;\s*|[.?!]\s+|\s+and\s+(?:also\s+)?|\s+then\s+|\s+as well as\s+|\s+plus\s+",
    re.IGNORECASE,
)


def clauses(prompt: str, analyze: Callable[[str], list[str]], limit: int = MAX_CLAUSES) -> list[str]:
    """The prompt's clauses with two or more content words; [] when it has fewer than two such clauses.

    Past ``limit`` clauses the prompt is a paragraph, not a list of intents: [] as well.
    """
    parts = [p.strip() for p in _SPLIT.split(prompt) if p and p.strip()]
    kept = [p for p in parts if len(analyze(p)) >= 2]
    if len(kept) < 2 or len(kept) > limit:
        return []
    return kept
