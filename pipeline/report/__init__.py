"""Report stage: per-run results -> each paper's tables (.md + .csv), figures (.png) and claims.

One module per paper (fedcurv.py, ...), each with `build(results, published, out_dir) -> claims`;
common.py reads the runs and writes tables; __main__.py runs them all and writes the index and the
claims ledger (reports/claims.md and the DVC metrics file reports/claims.json).
"""
