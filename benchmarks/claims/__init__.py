"""benchmarks/paper_claims.py as a package: one module per claim (``ppl_vs_length``, ``longform``,
``longppl``, ``lsm``, ``longppl_cost``, ``epl``), what they share once (``common``), the report (``report``)."""
