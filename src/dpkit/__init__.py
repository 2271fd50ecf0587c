"""dpkit: differential privacy with exact secure noise, explicit budgets and auditable mechanisms."""

__version__ = "0.1.0"
