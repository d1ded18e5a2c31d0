"""Selection: which candidate snippets fit a token budget, useful to the goal and not redundant."""
