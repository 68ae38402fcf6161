"""Audits: a reference (an LLM judge, or labels fed back) scores a random share of the
records a detector evaluated, and the true defect rate is estimated from both with an
interval (`estimate`, prediction-powered inference)."""
