"""LLM-as-judge support: the shared client, answer parsers and prompt templates."""
