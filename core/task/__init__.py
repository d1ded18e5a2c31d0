"""Task state: the task record, its seal and manifest, the token ledger, budgets and context pressure.

The task wing owns the record types; the seal hashes them and the manifest renders them.
"""
