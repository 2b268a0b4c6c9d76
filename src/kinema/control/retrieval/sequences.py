"""Training sequences with retrieved candidate payloads, in normalised model space.

Everything the network sees is normalised with :class:`Normaliser` (pose mean/std of
the training rows). A candidate for database row ``j`` (already in root space, so its
transplant to the current character's root is the row itself) is the payload
``[pose_j, pose_{j+1} - pose_j, contacts_j, cost]`` (width ``2 P + 3``), with pose and
delta normalised, contacts in {0, 1} and the matching cost at search time.

Retrieval (:class:`Retriever`): exact top-16 in the normalised matching-feature space,
``k`` of them sampled with ``p ~ exp(-cost / (tau * mean top-16 cost))``, refreshed every
``refresh`` frames; between refreshes each candidate index advances by one row per frame
(Motion Matching's playback). Training queries exclude their own clip and its mirror twin.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kinema.control.retrieval.pose import ground_height, hips_reach
from kinema.errors import KinemaError
from kinema.features.normalisation import Normaliser
from kinema.matching.database import Database
from kinema.matching.search import Exclusion


class Retriever:
    """Candidate search, sampling and payloads over one :class:`Database`.

    Args:
        db: the retrieval database.
        norm: pose normaliser of the model.
        k: candidates fed to the model; top: how many nearest rows to sample them from.
        tau: sampling temperature relative to the mean top cost (0: always the k best).
        refresh: frames between searches.
        groups: (C,) a group id per database clip (e.g. the actor): a training query then
            excludes every clip of its own group, not only its clip and mirror twin (None:
            each clip and its twin are a group).
        mask: (N,) bool, the rows a search may return (None: every row), e.g.
            :func:`kinema.matching.database.upright_mask` at runtime.

    ``ground`` is the floor (m) rigid poses are kept above
    (:func:`kinema.control.retrieval.pose.ground_height` of ``db``; set it to None for the
    hips' height as predicted, the runtime before the floor), and ``reach`` how far their
    hips may stray from the root (:func:`kinema.control.retrieval.pose.hips_reach`).
    """

    def __init__(self, db: Database, norm: Normaliser, k: int = 4, top: int = 16, tau: float = 0.5,
                 refresh: int = 6, groups: np.ndarray | None = None, mask: np.ndarray | None = None):
        self.db, self.norm, self.k, self.top, self.tau, self.refresh = db, norm, k, max(top, k), tau, refresh
        if mask is not None:
            mask = np.asarray(mask, bool)
            if mask.shape != (db.rows,) or not mask.any():
                raise KinemaError(f"a search mask must be ({db.rows},) bool with a True row, got {mask.shape}")
        self.mask = mask
        self.excluded = _exclusion_table(db, groups)
        self.poses_n = norm.normalise(db.pose)
        succ = db.successor(np.arange(db.rows))
        self.delta_n = ((db.pose[succ] - db.pose) / norm.std).astype(np.float32)
        self.contacts = db.contacts.astype(np.float32)
        self.ground = ground_height(db)
        self.reach = hips_reach(db)

    @classmethod
    def for_checkpoint(cls, db: Database, norm: Normaliser, meta: dict, **kwargs) -> Retriever:
        """The inference retriever of a checkpoint (its metadata ``meta``): its k, top and
        refresh, always the k best rows (tau 0); ``kwargs`` go to the constructor."""
        rc = meta.get("retrieval", {})
        return cls(db, norm, k=rc.get("k", 4), top=rc.get("top", 16), tau=0.0, refresh=rc.get("refresh", 6), **kwargs)

    @property
    def width(self) -> int:
        return 2 * self.db.pose_width + self.contacts.shape[1] + 1

    def search(self, features_n: np.ndarray, exclude_clips: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """Top rows (Q, top) and costs of normalised queries (Q, 27); ``exclude_clips``
        (Q, M) clip ids each query may not retrieve (-1 pads)."""
        ex = Exclusion(clip_end=1, clips=exclude_clips, mask=self.mask)
        idx, cost = self.db.search(features_n, self.top, ex)
        bad = idx < 0
        if bad.any():  # fewer rows allowed than asked: repeat the best
            idx = np.where(bad, idx[:, :1], idx)
            cost = np.where(bad, cost[:, :1], cost)
        return idx, cost

    def sample(self, idx: np.ndarray, cost: np.ndarray, rng: np.random.Generator | None
               ) -> tuple[np.ndarray, np.ndarray]:
        """k of the top rows per query (Q, k), without replacement (the k best when
        ``rng`` is None or ``tau`` is 0)."""
        if rng is None or self.tau <= 0:
            return idx[:, :self.k], cost[:, :self.k]
        scale = self.tau * np.maximum(cost.mean(1, keepdims=True), 1e-6)
        logits = -(cost - cost[:, :1]) / scale
        gumbel = -np.log(-np.log(rng.random(cost.shape) + 1e-12) + 1e-12)
        pick = np.argsort(-(logits + gumbel), axis=1)[:, :self.k]
        return np.take_along_axis(idx, pick, 1), np.take_along_axis(cost, pick, 1)

    def payload(self, rows: np.ndarray, cost: np.ndarray) -> np.ndarray:
        """Candidate rows (...) with costs (...) -> payloads (..., 2 P + 3) float32."""
        return np.concatenate([self.poses_n[rows], self.delta_n[rows], self.contacts[rows],
                               cost[..., None].astype(np.float32)], -1)

    def exclusions(self, clips: np.ndarray) -> np.ndarray:
        """(Q, M) clips a training query from clips (Q,) may not retrieve: its own, its
        mirror twin and the rest of its group (-1 pads)."""
        return self.excluded[clips]


def _exclusion_table(db: Database, groups: np.ndarray | None) -> np.ndarray:
    """(C, M) per clip: itself, its mirror twin, then the other clips of its group, -1 padded."""
    c = len(db.clip_names)
    ids = np.arange(c)
    twins = db.twins
    if groups is None:
        return np.stack([ids, twins], -1)
    groups = np.asarray(groups)
    if groups.shape != (c,):
        raise ValueError(f"groups must have one entry per database clip ({c}), got shape {groups.shape}")
    rows = [[i, twins[i]] + [j for j in ids[(groups == groups[i])] if j not in (i, twins[i])] for i in ids]
    table = np.full((c, max(map(len, rows))), -1, np.int64)
    for i, r in enumerate(rows):
        table[i, :len(r)] = r
    return table


@dataclass
class Batch:
    """Teacher-forced training windows (numpy, normalised): control (B, L, 12) raw,
    pose (B, L, P) inputs, target (B, L, P) next poses, contacts (B, L, 2) of the next
    frames, candidates (B, L, k, W), rows (B, L + 1) database rows of the inputs/targets."""

    control: np.ndarray
    pose: np.ndarray
    target: np.ndarray
    contacts: np.ndarray
    candidates: np.ndarray
    rows: np.ndarray


@dataclass
class OwnTake:
    """Training only: ``share`` of the sequences get one candidate slot from their own take,
    at a constant offset within ``shift`` frames of the row their take has reached, with its
    true matching cost (searches exclude the own take, so without it every candidate a
    network trains on is another take's approximation). ``rng`` is a generator of its own,
    so every other draw is what it is without it. Used by :class:`WindowSampler` (teacher
    forced) and :class:`~kinema.control.retrieval.rollout.CandidateStream` (rollouts)."""

    share: float
    shift: int
    rng: np.random.Generator

    def __post_init__(self):
        if not 0.0 <= self.share <= 1.0 or self.shift < 0:
            raise ValueError(f"own_share must lie in [0, 1] and own_shift be >= 0, got {self.share}, {self.shift}")

    def pick(self, b: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(which (B,) bool, shift (B,), slot (B,)) for a batch of ``b`` sequences."""
        return (self.rng.random(b) < self.share, self.rng.integers(-self.shift, self.shift + 1, b),
                self.rng.integers(0, k, b))

    @staticmethod
    def place(db: Database, rows: np.ndarray, shift: np.ndarray) -> np.ndarray:
        """Rows (...) moved by ``shift`` (broadcast), kept inside their clip with a successor."""
        clip = db.clip_of(rows)
        return np.clip(rows + shift, db.ranges[clip, 0], db.ranges[clip, 1] - 2)


class WindowSampler:
    """Random windows of ``length + 1`` rows inside the training clips of ``db`` with
    candidates from each search row's ground-truth query (searched once per row).

    ``own_share`` of the windows have one of their k candidate slots hold the window's own
    take instead, shifted by a constant offset drawn in [-``own_shift``, ``own_shift``]
    frames, with its true matching cost: a candidate whose quality runs from exact (offset 0)
    to half a second out of phase, so the network sees candidates worth following and can
    learn how far to trust one from its cost (searches exclude the own take, so without it
    every candidate it trains on is another take's approximation). Its draws come from a
    generator of their own: the other candidates, windows and noise are drawn exactly as
    without it, so a no-retrieval twin trained without it is this recipe's twin."""

    def __init__(self, retriever: Retriever, clips: np.ndarray, length: int, seed: int = 0,
                 allowed: np.ndarray | None = None, own_share: float = 0.0, own_shift: int = 30):
        self.r, self.db, self.length = retriever, retriever.db, length
        self.rng = np.random.default_rng(seed)
        self.own = OwnTake(own_share, own_shift, np.random.default_rng([seed, 1]))
        # allowed: (R,) the only start rows to draw from (e.g. where the data stays upright)
        self.allowed = None
        if allowed is not None:
            allowed = np.asarray(allowed, np.int64)
            ok = np.isin(self.db.clip_of(allowed), clips) & (allowed + length + 1 <= self.db.ranges[self.db.clip_of(allowed), 1])
            self.allowed = allowed[ok]
            if len(self.allowed) == 0:
                raise ValueError(f"no allowed start row has {length + 1} frames in a training clip")
        self.clips = np.asarray([c for c in clips if self.db.ranges[c, 1] - self.db.ranges[c, 0] > length + 1])
        if len(self.clips) == 0:
            raise ValueError(f"no training clip is longer than {length + 1} frames")
        self._top = np.full((self.db.rows, retriever.top), -1, np.int64)
        self._cost = np.zeros((self.db.rows, retriever.top), np.float32)
        self._done = np.zeros(self.db.rows, bool)
        lengths = self.db.ranges[self.clips, 1] - self.db.ranges[self.clips, 0] - length
        self.weights = lengths / lengths.sum()

    def top_rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Top rows and costs (..., top) of the ground-truth queries of ``rows`` (...),
        own clip and mirror twin excluded; searched on first use and kept."""
        todo = np.unique(rows[~self._done[rows]])
        if len(todo):
            ex = self.r.exclusions(self.db.clip_of(todo))
            self._top[todo], self._cost[todo] = self.r.search(self.db.features[todo], ex)
            self._done[todo] = True
        return self._top[rows], self._cost[rows]

    def starts(self, batch: int) -> np.ndarray:
        if self.allowed is not None:
            return self.rng.choice(self.allowed, batch)
        clips = self.rng.choice(self.clips, batch, p=self.weights)
        lo, hi = self.db.ranges[clips, 0], self.db.ranges[clips, 1] - self.length - 1
        return lo + (self.rng.random(batch) * (hi - lo + 1)).astype(np.int64)

    def candidates_for(self, rows: np.ndarray) -> np.ndarray:
        """(B, L) consecutive rows -> payloads (B, L, k, W) with the refresh schedule."""
        b, length = rows.shape
        phase = self.rng.integers(0, self.r.refresh, b)
        since = (np.arange(length)[None] + phase[:, None]) % self.r.refresh             # (B, L)
        searched = rows - since
        searched = np.maximum(searched, self.db.ranges[self.db.clip_of(rows[:, :1]), 0])
        since = rows - searched
        top, top_cost = self.top_rows(searched.reshape(-1))
        idx, cost = self.r.sample(top, top_cost, self.rng)
        idx = idx.reshape(b, length, -1)
        cost = cost.reshape(b, length, -1)
        if self.own.share > 0:
            idx, cost = self._own_take(searched, idx, cost)
        # One sample per search: frames sharing a search share its candidates.
        first = np.maximum(np.arange(length)[None] - since, 0)
        idx = np.take_along_axis(idx, first[..., None], 1)
        cost = np.take_along_axis(cost, first[..., None], 1)
        cur = self.db.successor(idx, since[..., None])
        return self.r.payload(cur, cost)

    def _own_take(self, searched: np.ndarray, idx: np.ndarray, cost: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
        """Searched rows (B, L), sampled rows and costs (B, L, k) -> the same with one slot
        of ``own_share`` of the windows holding the own take at a constant offset."""
        which, shift, slot = self.own.pick(*idx.shape[::2])
        if not which.any():
            return idx, cost
        rows = searched[which]
        own = OwnTake.place(self.db, rows, shift[which, None])
        f = self.db.features
        own_cost = ((f[own] - f[rows]) ** 2).sum(-1).astype(cost.dtype)  # the search's squared distance
        idx, cost = idx.copy(), cost.copy()
        idx[which, :, slot[which]] = own
        cost[which, :, slot[which]] = own_cost
        return idx, cost

    def batch(self, batch: int) -> Batch:
        starts = self.starts(batch)
        rows = starts[:, None] + np.arange(self.length + 1)[None]
        pose_n = self.r.poses_n[rows]
        return Batch(control=self.db.trajectory[rows[:, :-1]], pose=pose_n[:, :-1], target=pose_n[:, 1:],
                     contacts=self.r.contacts[rows[:, 1:]], candidates=self.candidates_for(rows[:, :-1]),
                     rows=rows)


class RandomRetriever(Retriever):
    """The control of the ablation table: uniformly random database rows instead of the
    nearest ones (same payload, with their true matching cost), separating the
    information in the retrieved poses from the capacity the pathway adds."""

    def __init__(self, *args, seed: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.rng = np.random.default_rng(seed)

    def search(self, features_n: np.ndarray, exclude_clips: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        idx = self.rng.integers(0, self.db.rows, (len(features_n), self.top))
        cost = ((self.db.features[idx] - features_n[:, None]) ** 2).sum(-1).astype(np.float32)
        return idx, cost
