"""Judge prompts: the official LongBench-Write prompt (``$INST$``, ``$RESPONSE$``), loaded at run time, never part of
this package; our HelloEval checklist rubric (per item a score in {0, 0.25, 0.5, 0.75, 1} and a reason, as JSON)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from harness.core.errors import UsageError

LONGBENCH_WRITE_PROMPT_URL = "https://raw.githubusercontent.com/THUDM/LongWriter/main/evaluation/judge.txt"


def load_longbench_write_prompt(path: str | None = None) -> str:
    """The official LongBench-Write judge prompt text (``path``, ``LCH_LONGBENCH_WRITE_PROMPT``, or the
    published file, downloaded once)."""
    from harness.data.documents import local_or_download

    source = local_or_download(
        path or os.environ.get("LCH_LONGBENCH_WRITE_PROMPT"),
        LONGBENCH_WRITE_PROMPT_URL,
        "LongBench-Write judge prompt (judge_prompt)",
    )
    return source.read_text(encoding="utf-8")


def longbench_write_messages(template: str, instruction: str, response: str) -> list[dict]:
    if "$INST$" not in template or "$RESPONSE$" not in template:
        raise UsageError("the LongBench-Write judge prompt must contain $INST$ and $RESPONSE$")
    return [{"role": "user", "content": template.replace("$INST$", instruction).replace("$RESPONSE$", response)}]


HELLOEVAL_SYSTEM = "You grade long-form writing against a checklist, strictly and fairly."

HELLOEVAL_RUBRIC = """Below are a writing instruction, a model's response and a checklist of yes/no questions about
the response. Grade every checklist item on this scale:

1    - the item is fully met; you cannot point to any flaw.
0.75 - met for the most part; small things could still be better.
0.5  - partly met; the overall judgement is mixed or unclear.
0.25 - only a few parts are met; important parts are missing.
0    - not met; the response needs substantial work on this item.

Give 1 only when you are sure nothing is left to improve. The response may be long; it ends where
the RESPONSE block ends.

INSTRUCTION:
{instruction}

RESPONSE:
{response}

CHECKLIST ({num_checklist} items):
{checklist}

Reply with a JSON list only, one object per checklist item, in order:
[{{"checklist_id": 0, "reason": "<why>", "evaluation_score": <score>}}, ...]"""


def helloeval_messages(instruction: str, response: str, checklists: Sequence[str]) -> list[dict]:
    items = json.dumps(
        [{"checklist_id": i, "checklist_content": c} for i, c in enumerate(checklists)], ensure_ascii=False
    )
    content = HELLOEVAL_RUBRIC.format(
        instruction=instruction, response=response, num_checklist=len(checklists), checklist=items
    )
    return [{"role": "system", "content": HELLOEVAL_SYSTEM}, {"role": "user", "content": content}]
