"""Evaluating tuned configurations: interleaved repeated cold runs against the default, and their statistics."""
