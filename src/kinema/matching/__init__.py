"""Motion-matching databases and exact k-nearest search.

- :mod:`kinema.matching.search`: :class:`SearchIndex` (exact, fast), :func:`brute_force`,
  :class:`Exclusion`.
- :mod:`kinema.matching.config`: :class:`DatabaseConfig` (presets ``lafan1``, ``lafan1_pose``, ``bandai``,
  JSON files).
- :mod:`kinema.matching.database`: :func:`build_database` / :func:`build_from_paths`,
  :class:`Database` (``Database.load(path)``, ``db.features``, ``db.search(...)``,
  ``db.fingerprint``).
"""
from kinema.matching.config import DatabaseConfig
from kinema.matching.database import Database, build_database, build_from_paths
from kinema.matching.search import Exclusion, SearchIndex, brute_force

__all__ = ["Database", "DatabaseConfig", "Exclusion", "SearchIndex", "brute_force", "build_database",
           "build_from_paths"]
