"""Honest in-memory stand-ins for the ports: they keep state and enforce the same rules as the real
adapters (contract tests in ``tests/contract`` run the same cases against both)."""
