"""Offload: what leaves the prompt (kind, outline, stub of a large output) and how a stored payload is queried back.

Compaction plans which journaled results may move out of the prompt; nothing is ever deleted.
"""
