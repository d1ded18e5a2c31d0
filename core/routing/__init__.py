"""Routing: which governance documents bear on a prompt, ranked, and whether to route at all.

Ranking (lexical + semantic fusion), the abstention model and its operating point, the policy
corpus parser, the built-in background prompts, and the metrics that score a routing run.
"""
