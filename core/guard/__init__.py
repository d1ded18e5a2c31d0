"""Guard: may an action run. Invariants, loop detection, shell side effects, globs, precheck verdicts and handoff contracts.

The only wing that imports another: guard reads task budgets and seals (guard -> task).
"""
