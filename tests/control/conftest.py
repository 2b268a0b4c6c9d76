"""Fixtures shared by the control tests: a small real retrieval database."""
from __future__ import annotations

import pytest

from kinema.control.retrieval.sequences import Retriever
from kinema.control.retrieval.training import build_clips
from kinema.features.normalisation import Normaliser
from kinema.matching.config import DatabaseConfig

GAMES105_CLIPS = ["idle", "run_forward", "walk_and_turn_left", "walk_forward"]


@pytest.fixture(scope="session")
def games105_db(sample_data):
    """Four bundled GAMES-105 clips and their mirrors at 60 Hz: the retrieval database is the
    motion-matching database (``kinema db build``)."""
    paths = [sample_data / "games105" / f"{c}.bvh" for c in GAMES105_CLIPS]
    return build_clips(paths, DatabaseConfig.preset("games105"), True)


@pytest.fixture(scope="session")
def games105_retriever(games105_db):
    return Retriever(games105_db, Normaliser.fit(games105_db.pose, floor=1e-2))
