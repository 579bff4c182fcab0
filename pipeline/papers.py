"""The papers this project reproduces, in the order the reports list them, with their titles.

The one list of them: a run's `paper` must name one (pipeline/runs.py), and each has a report module
pipeline/report/<paper>.py and its published numbers under its key of pipeline/report/published.yaml
(tests/test_report.py checks those two). It imports nothing, so every layer may import it.
"""

from __future__ import annotations

TITLES = {
    "fedcurv": "Shoham et al. 2019, Overcoming Forgetting in Federated Learning on Non-IID Data",
    "importance": "Kim, Kim & Kim, Overcoming Forgetting in Federated Learning via Importance From Agent",
    "tce": "Legate, Caccia & Belilovsky, Reducing Forgetting in Federated Learning with Truncated Cross-Entropy",
    "fedwavg": "Hong, Kang & Lee, Weighted Averaging Federated Learning Based on Example Forgetting Events in "
    "Label Imbalanced Non-IID",
}
PAPERS = tuple(TITLES)
