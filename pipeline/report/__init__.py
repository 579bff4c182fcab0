"""Report stage: per-run results -> each paper's tables (.md + .csv), figures (.png) and claims.

One module per paper (fedcurv.py, ...), each with `build(context) -> claims`, which reads only its
common.ReportContext (the runs, the paper's published numbers, the profile, ...) and writes only into the
context's output folder;
common.py reads the runs (reports/runs/<run>/seed<s>/, grouped by run into a SeededRun) and writes
tables and figures; seeds.py holds the summaries over seeds (mean ± sd, last-k mean) and the one rule
that decides every claim; __main__.py runs them all and writes the index, the claims ledger
(reports/claims.md and the DVC metrics file reports/claims.json) and the headline metrics file
reports/summary.json (per paper: claims' totals, each run's final accuracy and curve mean).
"""
