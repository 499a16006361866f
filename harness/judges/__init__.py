"""LLM judges over any OpenAI-compatible server: client, prompts, reply parsers, settings and the judge stage."""
