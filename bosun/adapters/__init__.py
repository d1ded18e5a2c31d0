"""Framework adapters on the warm daemon: ``bosun.adapters.langchain`` and ``bosun.adapters.llamaindex``.

Each module needs its framework (the ``langchain`` and ``llamaindex`` extras of bosun-mcp) and is built on
``bosun.ProvenanceMiddleware``; nothing here imports a framework until its module is imported.
"""
