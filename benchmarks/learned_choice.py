"""Does a learned choice among the retrieved rows beat motion matching's cost? (issue 17: "an
output that does not regress to the mean: a categorical head over which the retrieved
candidates vote")

A *chooser* is the runtime motion-matching controller (:class:`MotionMatchingController`,
inertialized transitions, ``kinema eval``'s ``motion_matching``) whose every search returns
the ``--top`` rows of lowest matching cost plus the row that continues the playing one, and
a small Mamba picks the row to play among them instead of the lowest cost. The Mamba reads,
per frame, the matching query and the pose of the frame it is at (its history); a shared
encoder reads each candidate relative to them (feature and pose differences, log matching
cost); a head scores each (encoded history, encoded candidate) pair. Its output is a
categorical choice, so what plays is always a database row's motion, never an average.

Training (teacher forced, on the training takes of the LaFAN1 recipe; a search never
returns the query's own take or its mirror, as in the retrieval training): the candidates of
every frame are the top rows of its own query and the row that continues the lowest-cost
row of six frames before; the target is softmax(-d / tau) over them, with d (cm) the mean
root-space joint distance of each candidate's next ``--future`` frames (as a transition
plays them: from the row after it) to the actor's next frames, plus 100 x the distance of
its 1-s root path (trajectory features: positions in m, unit directions) to the actor's.
Without the path term the chooser learns to pick by body pose alone and leaves the
requested path (root error 0.97 m, session 31).

Evaluation: ``kinema eval``'s LaFAN1 windows (the recipe's test takes, 300 frames after 32 of
context, stride 120); the chooser's history is warmed on each window's context, then both
controllers follow the window's future root path re-expressed relative to their own root.
Intervals resample takes, then windows within them.

Transition costs (session 32): ``--chooser-stay`` adds a logit to the continuing row's score,
``--stay`` runs motion matching with the continuing row's cost lowered by that much; both are
chosen on the validation take (``--takes validation``), then run once on the test takes.
``--runtime`` also drives every method through the evaluation's scripted sticks and crowd
(``kinema eval --scenarios``, motion matching through
:func:`~kinema.control.retrieval.evaluate.matching_runtime`) and prints each one's
controller targets against motion matching (:mod:`kinema.control.retrieval.targets`).

    .venv/bin/python benchmarks/learned_choice.py train -o /tmp/chooser.safetensors [--steps 1000] [--future 30]
    .venv/bin/python benchmarks/learned_choice.py eval /tmp/chooser.safetensors [--stay 1] [--chooser-stay 4,0] [--runtime]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

from kinema.control.inertialize import PoseState
from kinema.control.matching import MotionMatchingController
from kinema.control.retrieval.evaluate import HORIZONS, matching_rollout, matching_runtime, take_groups, window_starts
from kinema.control.retrieval.metrics import floor_height, grouped_bootstrap_ci, joint_positions, summary, window_metrics
from kinema.control.retrieval.sequences import Retriever
from kinema.control.retrieval.training import build_clips, build_databases, load_config, resolve_clips
from kinema.features.normalisation import Normaliser
from kinema.matching.database import Database
from kinema.matching.search import Exclusion
from kinema.nn.mamba import Mamba

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "retrieval_lafan1_rigid.toml"
PATH_WEIGHT = 100.0    # cm per (m + unit-direction distance) of the 1-s root path
CONTINUE_AFTER = 6     # the training's continuing row: the lowest-cost row of 6 frames before, advanced


class Chooser(nn.Module):
    """Scores (..., K) of K candidate rows from a history (Mamba over per-frame
    [query (D), pose (P)], normalised) and each candidate's [feature difference (D), pose
    difference (P), log(1 + cost)] to the current frame."""

    def __init__(self, features: int, pose: int, d_model: int = 64):
        super().__init__()
        self.backbone = Mamba(features + pose, d_model, d_model=d_model, n_layers=2, d_state=16, d_conv=4)
        self.encoder = nn.Sequential(nn.Linear(features + pose + 1, 2 * d_model), nn.ELU(), nn.Linear(2 * d_model, d_model))
        self.head = nn.Sequential(nn.Linear(2 * d_model, 2 * d_model), nn.ELU(), nn.Linear(2 * d_model, 1))

    def scores(self, h: torch.Tensor, cand: torch.Tensor) -> torch.Tensor:
        """h (..., H) encoded history, cand (..., K, D + P + 1) -> scores (..., K)."""
        e = self.encoder(cand)
        return self.head(torch.cat([h.unsqueeze(-2).expand_as(e), e], -1)).squeeze(-1)


class Data:
    """The database, its normalised poses and root-space joints, and the pieces every
    candidate set needs."""

    def __init__(self, db: Database, top: int, future: int, path_weight: float = PATH_WEIGHT):
        self.db, self.top, self.future, self.path_weight = db, top, future, path_weight
        self.norm = Normaliser.fit(db.pose, floor=1e-3)
        self.pose_n = self.norm.normalise(db.pose).astype(np.float32)
        self.joints = joint_positions(db, db.pose).astype(np.float32)
        self.retriever = Retriever(db, self.norm, k=1, top=top, tau=0.0)
        t = db.trajectory_start
        self.path = slice(t, t + 4 * len(db.config.trajectory_frames))

    def inputs(self, q: np.ndarray, pose_n: np.ndarray, rows: np.ndarray, cost: np.ndarray) -> np.ndarray:
        """Candidate inputs (Q, K, D + P + 1) of rows (Q, K) for queries (Q, D) at poses (Q, P)."""
        return np.concatenate([self.db.features[rows] - q[:, None], self.pose_n[rows] - pose_n[:, None],
                               np.log1p(cost)[..., None]], -1).astype(np.float32)

    def distance(self, src: Database, src_joints: np.ndarray, rows: np.ndarray, cand: np.ndarray) -> np.ndarray:
        """d (Q, K), cm, of candidates (Q, K) for source rows (Q,) (the module docstring)."""
        steps = np.arange(1, self.future + 1)
        truth = src_joints[src.successor(rows[:, None], steps[None])]                      # (Q, n, J, 3)
        played = self.joints[self.db.successor(cand[:, :, None], steps[None, None])]     # (Q, K, n, J, 3)
        body = np.linalg.norm(played - truth[:, None], axis=-1).mean((2, 3)) * 100.0
        a = self.db.raw_features[cand][..., self.path].reshape(*cand.shape, -1, 4)
        b = src.raw_features[rows][:, self.path].reshape(len(rows), 1, -1, 4)
        path = (np.linalg.norm((a - b)[..., :2], axis=-1) + np.linalg.norm((a - b)[..., 2:], axis=-1)).mean(-1)
        return body + self.path_weight * path

    def candidates(self, src: Database, src_joints: np.ndarray, q_all: np.ndarray, rows: np.ndarray,
                   exclude: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows (Q, 1 + top): the continuing row then the top ones, costs, d) for source rows (Q,)."""
        q = q_all[rows]
        idx, _ = self.retriever.search(q, exclude)
        before = np.maximum(rows - CONTINUE_AFTER, src.ranges[src.clip_of(rows), 0])
        prev, _ = self.retriever.search(q_all[before], exclude)
        cont = self.db.successor(prev[:, 0], rows - before)
        cand = np.concatenate([cont[:, None], idx], 1)
        cost = ((self.db.features[cand] - q[:, None]) ** 2).sum(-1)
        return cand, cost, self.distance(src, src_joints, rows, cand)

    def batch(self, src: Database, src_joints: np.ndarray, q_all: np.ndarray, p_all: np.ndarray,
              rows: np.ndarray, exclude: np.ndarray | None):
        """Tensors (history inputs (B, L, D + P), candidate inputs (B, L, K, ...), d (B, L, K))
        and the costs (B, L, K) of windows of source rows (B, L)."""
        flat = rows.reshape(-1)
        cand, cost, d = self.candidates(src, src_joints, q_all, flat, exclude)
        x = np.concatenate([q_all[flat], p_all[flat]], -1).reshape(*rows.shape, -1)
        c = self.inputs(q_all[flat], p_all[flat], cand, cost).reshape(*rows.shape, cand.shape[1], -1)
        shape = (*rows.shape, cand.shape[1])
        return (torch.as_tensor(x), torch.as_tensor(c), torch.as_tensor(d.reshape(shape).astype(np.float32)),
                cost.reshape(shape))


def windows(src: Database, count: int, length: int, rng: np.random.Generator) -> np.ndarray:
    """(count, length) consecutive rows inside random clips (after their first frames)."""
    r = src.ranges
    ok = np.flatnonzero(r[:, 1] - r[:, 0] > length + 2 * CONTINUE_AFTER + 2)
    clip = rng.choice(ok, count)
    span = r[clip, 1] - r[clip, 0] - length - 2 * CONTINUE_AFTER
    start = r[clip, 0] + CONTINUE_AFTER + (rng.random(count) * span).astype(np.int64)
    return start[:, None] + np.arange(length)[None]


def train(args) -> None:
    cfg = load_config(args.config)
    db, val = build_databases(cfg)
    data = Data(db, args.top, args.future)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    model = Chooser(db.features.shape[1], db.pose_width)
    opt = torch.optim.Adam(model.parameters(), args.lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, args.lr, total_steps=args.steps, pct_start=0.1)
    q_db = db.features.astype(np.float32)
    exclude = lambda rows: data.retriever.exclusions(db.clip_of(rows))  # noqa: E731
    vq = db.normalise(val.raw_features).astype(np.float32)
    vp = data.norm.normalise(val.pose).astype(np.float32)
    vx, vc, vd, vcost = data.batch(val, joint_positions(db, val.pose), vq, vp, windows(val, 32, 64, np.random.default_rng(1)), None)
    lowest = vd.gather(-1, torch.as_tensor(vcost).argmin(-1, keepdim=True)).mean().item()
    start = time.time()
    for step in range(args.steps):
        rows = windows(db, args.batch, 64, rng)
        x, c, d, _ = data.batch(db, data.joints, q_db, data.pose_n, rows, exclude(rows.reshape(-1)))
        target = torch.softmax(-d / args.tau, -1)
        loss = -(target * torch.log_softmax(model.scores(model.backbone(x), c), -1)).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 100 == 0 or step == args.steps - 1:
            with torch.no_grad():
                picked = vd.gather(-1, model.scores(model.backbone(vx), vc).argmax(-1, keepdim=True)).mean().item()
            print(f"step {step} loss {loss.item():.3f} | validation d of the row played, cm: chooser {picked:.2f}, "
                  f"lowest cost {lowest:.2f}, best {vd.min(-1).values.mean().item():.2f} ({time.time() - start:.0f} s)",
                  flush=True)
    meta = {"config": str(args.config), "top": str(args.top), "future": str(args.future), "tau": str(args.tau),
            "normalisation": json.dumps(data.norm.to_json()), "database": db.fingerprint,
            "steps": str(args.steps), "seconds": f"{time.time() - start:.0f}"}
    save_file(model.state_dict(), args.out, metadata=meta)
    print(f"wrote {args.out}")


class PickedMatching(MotionMatchingController):
    """Motion matching (one character) whose every search is offered the ``data.top`` rows of
    lowest cost and the row continuing the playing one (as a transition target: a transition
    plays the row after it), and plays the one :meth:`pick` returns; picking the continuing
    row keeps playing without a transition."""

    def __init__(self, db: Database, data: Data, **kwargs):
        super().__init__(db, **kwargs)
        self.data = data

    def pick(self, due: np.ndarray, q: np.ndarray, cand: np.ndarray, cost: np.ndarray) -> np.ndarray:
        """(Q,) the column of ``cand`` (Q, 1 + top) to play for the characters ``due`` (Q,)
        with queries ``q`` (Q, D) and matching costs ``cost`` (Q, 1 + top)."""
        raise NotImplementedError

    def _search(self, due: np.ndarray, next_rows: np.ndarray, request: np.ndarray | None = None, clips=None
                ) -> tuple[np.ndarray, np.ndarray]:
        cfg = self.config
        q = self._queries(request)[due]
        ex = Exclusion(current=self.frames[due], around=cfg.exclude_around, clip_end=cfg.exclude_clip_end,
                       clips=clips, mask=self.search_mask)
        idx, _ = self.db.search(q, k=self.data.top, exclude=ex)
        idx = np.where(idx < 0, idx[:, :1], idx)
        cand = np.concatenate([next_rows[:, None] - 1, idx], 1)
        cost = ((self.db.features[cand] - q[:, None]) ** 2).sum(-1)
        best = cand[np.arange(len(cand)), self.pick(due, q, cand, cost)]
        keep = best == next_rows - 1
        return np.where(keep, next_rows, best), ~keep


class StayingMatching(PickedMatching):
    """Motion matching with a transition cost: the continuing row's matching cost is lowered
    by ``stay`` (squared normalised feature distance), so a search leaves the playing row
    only for a row that matches better by that much (``stay`` 0: motion matching without a
    transition cost, over the same rows; the runtime's own, ``MatchingConfig.transition_cost``,
    is 1 since session 33 and is what this benchmark's plain ``motion matching`` runs)."""

    def __init__(self, db: Database, data: Data, stay: float, **kwargs):
        super().__init__(db, data, **kwargs)
        self.stay = stay

    def pick(self, due: np.ndarray, q: np.ndarray, cand: np.ndarray, cost: np.ndarray) -> np.ndarray:
        return (cost - self.stay * (np.arange(cand.shape[1]) == 0)).argmin(-1)


class ChosenMatching(PickedMatching):
    """:class:`PickedMatching` whose picks a :class:`Chooser` makes; ``stay`` is added to the
    continuing row's score (a logit), the chooser's transition cost.

    ``context`` (L, D + P) normalised inputs of the frames before the start warm the
    chooser's history in :meth:`start_from`; every :meth:`follow` adds the current frame."""

    def __init__(self, db: Database, chooser: Chooser, data: Data, stay: float = 0.0, **kwargs):
        super().__init__(db, data, **kwargs)
        self.chooser, self.stay = chooser, stay
        self.context: np.ndarray | None = None
        self.state = self.chooser.backbone.initial_state(self.n)
        self.h = None

    @torch.no_grad()
    def start_from(self, pose: PoseState, features: np.ndarray, request: np.ndarray,
                   root_position: np.ndarray, root_direction: np.ndarray, clips=None) -> None:
        _, self.state = self.chooser.backbone.forward_with_state(torch.as_tensor(self.context)[None])
        super().start_from(pose, features, request, root_position, root_direction, clips)

    @torch.no_grad()
    def _advance(self, search: np.ndarray, request: np.ndarray | None = None, clips=None) -> np.ndarray:
        # every frame, before its search: the history reads this frame's query and pose
        # (``follow`` passes the request; the runtime ``step`` the springs' prediction)
        q = self._queries(request).astype(np.float32)
        x = torch.as_tensor(np.concatenate([q, self.data.pose_n[self.frames]], -1))
        self.h, self.state = self.chooser.backbone.step(self.state, x)
        return super()._advance(search, request, clips)

    @torch.no_grad()
    def pick(self, due: np.ndarray, q: np.ndarray, cand: np.ndarray, cost: np.ndarray) -> np.ndarray:
        inputs = self.data.inputs(q.astype(np.float32), self.data.pose_n[self.frames[due]], cand, cost)
        scores = self.chooser.scores(self.h[due], torch.as_tensor(inputs)).numpy()
        return (scores + self.stay * (np.arange(cand.shape[1]) == 0)).argmax(-1)


class OracleMatching(PickedMatching):
    """:class:`PickedMatching` that picks the row of least d against the actor's own future
    (:meth:`Data.distance`): the headroom of any chooser of the same rows. ``row`` is the
    source row whose frame the character shows now (the start: the context's last row); a
    search picks what plays from the row after it."""

    def __init__(self, db: Database, data: Data, source: Database, source_joints: np.ndarray):
        super().__init__(db, data)
        self.source, self.source_joints = source, source_joints
        self.row = 0

    def follow(self, request: np.ndarray, dt: float, clips=None) -> PoseState:
        out = super().follow(request, dt, clips)
        self.row += 1
        return out

    def pick(self, due: np.ndarray, q: np.ndarray, cand: np.ndarray, cost: np.ndarray) -> np.ndarray:
        return self.data.distance(self.source, self.source_joints, np.full(len(cand), self.row), cand).argmin(-1)


def evaluate(args) -> None:
    with safe_open(args.chooser, "pt") as f:   # one read: the weights and their metadata
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    cfg = load_config(meta["config"])
    db = build_databases(cfg)[0]
    data = Data(db, int(meta["top"]), int(meta["future"]), args.path_weight)
    model = Chooser(db.features.shape[1], db.pose_width)
    model.load_state_dict(tensors)
    model.eval()
    test = [p for p in resolve_clips(cfg["data"]["clips"], Path(cfg["data"].get("base", ".")))
            if p.stem in cfg["data"][args.takes]]
    source = build_clips(test, db.config, False, like=db)
    frames, context = args.frames, args.context
    starts = window_starts(source, context + frames + 1, args.stride)[:args.max_windows]
    rows = (starts + context)[:, None] + np.arange(frames)[None]
    truth = source.pose[rows]
    roots = (source.root_positions[rows], source.root_directions[rows])
    floor = floor_height(db)
    truth_m = window_metrics(truth, truth, data.norm, db, floor, roots + roots, True, source.contacts[rows] > 0.5)
    oracle = OracleMatching(db, data, source, joint_positions(db, source.pose))
    results = {}
    methods = ([("motion matching", None)]
               + [(f"motion matching, stay {v:g}", StayingMatching(db, data, v)) for v in args.stay]
               + [("chooser" + (f", stay {v:g}" if v else ""), ChosenMatching(db, model, data, v))
                  for v in args.chooser_stay]
               + ([("oracle", oracle)] if args.oracle else []))
    for name, ctl in methods:
        t = time.time()
        outs = []
        for w, s in enumerate(starts):
            ctx = np.arange(s, s + context)
            if isinstance(ctl, ChosenMatching):
                ctl.context = np.concatenate([db.normalise(source.raw_features[ctx]),
                                              data.norm.normalise(source.pose[ctx])], -1).astype(np.float32)
            oracle.row = int(s + context - 1)
            outs.append(matching_rollout(db, source, starts[w:w + 1], context, frames, controller=ctl))
        pose, rp, rd, contacts = (np.concatenate([o[i] for o in outs]) for i in range(4))
        results[name] = window_metrics(pose, truth, data.norm, db, floor, (rp, rd) + roots, True, contacts)
        print(f"{name}: {time.time() - t:.0f} s", flush=True)
    groups = take_groups(source, starts)
    hs = [h for h in HORIZONS if h <= frames]
    chooser = next(n for n in results if n.startswith("chooser"))   # the first chooser is compared
    mm, ch = (results[k]["_frame_joint_error_cm"] for k in ("motion matching", chooser))
    print(f"\n{len(starts)} windows of {[p.stem for p in test]}; chooser {args.chooser} "
          f"(top {meta['top']}, next {meta['future']} frames)\n")
    names = list(results)
    print("| | " + " | ".join(names) + " |\n" + "|---" * (len(names) + 1) + "|")
    print(f"| joint error over the first {' / '.join(f'{h / db.fps:g}' for h in hs)} s, cm | "
          + " | ".join(" / ".join(f"{results[n]['_frame_joint_error_cm'][:, :h].mean():.1f}" for h in hs)
                       for n in names) + " |")
    ci = [grouped_bootstrap_ci(mm[:, :h].mean(1) - ch[:, :h].mean(1), groups) for h in hs]
    pad = " |" * (len(names) - 2)
    print(f"| motion matching − {chooser}, 95% | | " + " / ".join(f"[{a:+.1f}, {b:+.1f}]" for a, b in ci) + " |" + pad)
    sp = [results[k]["joint_speed_ratio"] for k in ("motion matching", chooser)]
    lo, hi = grouped_bootstrap_ci(sp[0] - sp[1], groups)
    print(f"| joint speed ratio, motion matching − {chooser}, 95% | | [{lo:+.2f}, {hi:+.2f}] |" + pad)
    s = {k: summary(v, truth_m) for k, v in results.items()}
    for key, fmt in (("joint_speed_ratio", ".2f"), ("accel_ratio", ".2f"), ("energy_window_fraction", ".2f"),
                     ("root_error_m", ".3f"), ("heading_error_deg", ".2f"), ("foot_skate_locked_cm_s", ".1f"),
                     ("frechet", ".1f")):
        print(f"| {key} | " + " | ".join(f"{s[n][key]:{fmt}}" for n in names) + " |")
    if not args.runtime:
        return
    from kinema.control.retrieval.evaluate import ground_truth_summary
    from kinema.control.retrieval.scenarios import database_feet_down_share, database_stride_ratio
    from kinema.control.retrieval.targets import targets_table
    from kinema.matching.database import upright_mask

    mask = upright_mask(db)
    makers = {"motion matching": lambda **kw: MotionMatchingController(db, search_mask=mask, **kw)}
    for name, ctl in methods[1:]:
        if isinstance(ctl, StayingMatching):
            makers[name] = lambda stay=ctl.stay, **kw: StayingMatching(db, data, stay, search_mask=mask, **kw)
        elif isinstance(ctl, ChosenMatching):
            makers[name] = lambda stay=ctl.stay, **kw: ChosenMatching(db, model, data, stay, search_mask=mask, **kw)
    runs = {}
    for name, make in makers.items():
        t = time.time()
        runs[name] = matching_runtime(db, make, None, args.scenario_frames)
        print(f"{name}, scenarios and crowd: {time.time() - t:.0f} s", flush=True)
    print("\n| scenario | " + " | ".join(runs) + " |\n" + "|---" * (len(runs) + 1) + "|")
    print("| | skating cm/s · root error m · travelled / path m · stride ratio · feet down |" + " |" * (len(runs) - 1))
    for sc in runs["motion matching"]["scenarios"]:
        cells = []
        for r in runs.values():
            v = r["scenarios"][sc]
            cells.append(f"{v['foot_skate_cm_s']:.1f} · {v['root_error_m']:.2f} · {v['travelled_m']:.0f} / "
                         f"{v['path_m']:.0f} · {v['stride_ratio'] or 0:.2f} · "
                         + ("-" if v["feet_down_share"] is None else f"{v['feet_down_share']:.2f}"))
        print(f"| {sc} | " + " | ".join(cells) + " |")
    print("| crowd: fallen / sunk / airborne of 64 | " + " | ".join(
        f"{r['crowd']['fallen']} / {r['crowd']['sunk']} / {r['crowd']['airborne']}" for r in runs.values()) + " |")
    # the targets of each method against inertialized motion matching, read by the library's
    # checker from a result shaped as ``kinema eval``'s (no twin: a choice has none)
    base = {"database_stride_ratio": database_stride_ratio(db), "database_feet_down_share": database_feet_down_share(db),
            "scenarios_motion_matching": runs["motion matching"]["scenarios"]}
    truth_s = ground_truth_summary(truth_m)
    for name in names[1:]:
        if name not in runs:
            continue
        cis = [list(grouped_bootstrap_ci(mm[:, :h].mean(1) - results[name]["_frame_joint_error_cm"][:, :h].mean(1),
                                         groups)) for h in hs]
        result = {"free_running": {"with": s[name], "baselines": {"motion_matching": s["motion matching"]},
                                   "ground_truth": truth_s, "horizons": {"other_minus_model_ci95": {"motion_matching": cis}}},
                  **runs[name], **base}
        print(f"\n### targets: {name}\n\n{targets_table(result)}")


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train")
    t.add_argument("-o", "--out", required=True)
    t.add_argument("--config", default=str(CONFIG))
    t.add_argument("--steps", type=int, default=1000)
    t.add_argument("--batch", type=int, default=16)
    t.add_argument("--lr", type=float, default=2e-3)
    t.add_argument("--top", type=int, default=16)
    t.add_argument("--future", type=int, default=30, help="frames of body motion in the target distance")
    t.add_argument("--tau", type=float, default=1.0, help="cm, temperature of the target distribution")
    t.add_argument("--seed", type=int, default=0)
    e = sub.add_parser("eval")
    e.add_argument("chooser")
    e.add_argument("--frames", type=int, default=300)
    e.add_argument("--context", type=int, default=32)
    e.add_argument("--stride", type=int, default=120)
    e.add_argument("--max-windows", type=int, default=None, help="the first N windows only (a quick look)")
    e.add_argument("--takes", choices=("test", "validation"), default="test",
                   help="the config's takes to evaluate on (transition costs are chosen on the validation take)")
    e.add_argument("--stay", type=_floats, default=[],
                   help="also motion matching with these transition costs (comma-separated, squared feature distance)")
    e.add_argument("--runtime", action="store_true",
                   help="also drive every method through the runtime: the scripted sticks and the crowd, then the targets")
    e.add_argument("--scenario-frames", type=int, default=3600)
    e.add_argument("--chooser-stay", type=_floats, default=[0.0],
                   help="the chooser's transition costs (comma-separated logits added to the continuing row)")
    e.add_argument("--oracle", action="store_true",
                   help="also run the oracle: the candidate of least d against the actor's own future")
    e.add_argument("--path-weight", type=float, default=PATH_WEIGHT,
                   help="the oracle's d: cm per unit of root-path distance (0: by the body's future alone)")
    args = p.parse_args()
    torch.set_num_threads(1)
    train(args) if args.command == "train" else evaluate(args)


if __name__ == "__main__":
    main()
