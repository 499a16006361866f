"""LLM judges over any OpenAI-compatible server (installed as ``harness.judges``).

* :mod:`harness.judges.client` — async client: bounded concurrency, streamed replies (a silent server is given up
  after ``idle_timeout``, a slow one is waited for), retries with backoff, on-disk cache keyed by the full request (a
  killed run resumes without re-asking answered requests).
* :mod:`harness.judges.prompts` — the official LongBench-Write prompt loaded at run time, the HelloEval
  checklist rubric in our own words.
* :mod:`harness.judges.parsing` — reply parsers (official behaviour first, then fallbacks).
"""
