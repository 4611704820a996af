"""opcost: what one low-level operation costs, and whether a change made it cheaper."""

__version__ = "0.1.0"
