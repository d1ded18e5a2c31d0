"""Audit: is each claim of an answer supported, contradicted or unsupported by an allowed source.

Claim extraction, claim-to-sentence matching, contradiction and over-claim checks, provenance
(allowlists, freshness) and the audit's configuration.
"""
