"""Model card of a retrieval controller: markdown written only from the checkpoint's
metadata and an evaluation result (:func:`kinema.control.retrieval.evaluate.evaluate`);
no value is typed by hand."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

from kinema.control.retrieval.targets import targets_table
from kinema.data import portable_path


def _portable(path: str | None) -> str:
    """A recorded config path as the card prints it (older checkpoints recorded it as given,
    often absolute): relative to the current folder, or shared:/sample:."""
    return "<config>" if path is None else portable_path(path)


def reproduce_command(cfg: dict, out: str | None = None) -> str:
    """The ``kinema train`` command that rebuilds a checkpoint from its recorded ``cfg``: the
    config file it names, then a ``--set SECTION.KEY=VALUE`` for every recorded value that the
    file, as it reads now, does not hold (the overrides it was trained with, or settings the
    file has since changed), then ``-o out`` when given (the file's own ``out`` may name another
    stage). Paths given as overrides (``train.init``) print as :func:`~kinema.data.portable_path`
    does. If the file is not found from the current folder, the command names it alone and
    says so."""
    from kinema.control.retrieval.training import load_config  # torch: only when a card is written

    source = cfg.get("source")
    if source is None:
        return "kinema train <config>"
    command = f"kinema train {_portable(source)}"
    if not Path(source).is_file():
        return f"{command} (not found here: every setting is in the Training table)"
    now = load_config(source)
    sets = []
    for section, values in cfg.items():
        if not isinstance(values, dict):
            continue
        held = now.get(section, {})
        for key, value in values.items():
            if (section, key) == ("data", "base") or (key in held and held[key] == value):
                continue
            if key == "init" and value:
                value = portable_path(value)
            text = value if isinstance(value, str) else json.dumps(value)
            sets.append(f"--set {section}.{key}={shlex.quote(text)}")
    return " ".join([command, *sets] + ([f"-o {shlex.quote(out)}"] if out else []))


def _fmt(v) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:.4f}" if abs(v) < 1000 else f"{v:,.1f}"
    if isinstance(v, (list, tuple)):
        return ", ".join(_fmt(x) for x in v)
    return str(v)


def _table(rows: list[tuple[str, object]], head=("", "")) -> list[str]:
    out = [f"| {head[0]} | {head[1]} |", "|---|---|"]
    out += [f"| {k} | {_fmt(v)} |" for k, v in rows]
    return out


def _metrics_table(regime: dict) -> list[str]:
    rows = {"retrieved candidates": regime["with"], "null candidates (same model)": regime["without"],
            **{k.replace("_", " "): v for k, v in regime["baselines"].items()}}
    keys = list(regime["with"])
    out = ["| | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
    out += [f"| {name} | " + " | ".join(_fmt(m.get(k)) for k in keys) + " |" for name, m in rows.items()]
    return out


def model_card(meta: dict, result: dict | None, path: str = "", out: str | None = None) -> str:
    """Markdown card from checkpoint metadata ``meta`` and an evaluation ``result``, titled
    ``path``; its reproduce line writes to ``out`` (the checkpoint's path) when given."""
    db = meta.get("database", {})
    arch = meta["architecture"]
    hp = arch.get("hparams", {})
    hist = meta.get("history", {})
    lines = [f"# Model card: {path or 'retrieval controller'}", ""]
    lines += ["## Database", ""]
    lines += _table([("fingerprint", db.get("fingerprint")), ("rows", db.get("rows")),
                     ("pose width", db.get("pose_width")), ("frame time (s)", db.get("frame_time")),
                     ("clips", len(db.get("clips", []))), ("clip names", db.get("clips")),
                     ("validation clips (held out, select the checkpoint)", meta.get("validation_clips")),
                     ("test clips (held out, evaluation only)", meta.get("test_clips") or None),
                     ("joints", len(db.get("joints", []))), ("mirrored clips", db.get("mirror")),
                     ("build config", json.dumps(db.get("config"))),
                     ("rebuild it", f"`{db['build_command']}`" if db.get("build_command") else None)],
                    ("field", "value"))
    lines += ["", "## Architecture", ""]
    ret = meta.get("retrieval", {})
    rows = [("class", arch.get("class"))] + [(k, v) for k, v in hp.items()]
    if arch.get("class") == "ConcatRetrievalMamba":   # k slots of (candidate, presence flag)
        extra = hp.get("k", 0) * (hp.get("candidate_dim", 0) + 1)
    else:
        extra = hp.get("retrieval_dim", 0) if hp.get("use_retrieval") else 0
    rows += [("input_dim (backbone)", hp.get("control_dim", 0) + hp.get("pose_dim", 0) + extra),
             ("candidate tensor", f"k={hp.get('k')} x {hp.get('candidate_dim')}"),
             ("retrieval: top / tau / refresh", f"{ret.get('top')} / {ret.get('tau')} / {ret.get('refresh')}")]
    rows += [(f"parameters: {k}", v) for k, v in meta.get("parameters", {}).items()]
    lines += _table(rows, ("field", "value"))
    lines += ["", "## Training", ""]
    cfg = meta.get("config", {})
    lines += _table([(k, v) for k, v in cfg.get("train", {}).items()] +
                    [("loss weights", json.dumps(meta.get("loss_weights"))),
                     ("training time (s)", meta.get("train_seconds")),
                     ("torch threads", meta.get("torch_threads"))], ("setting", "value"))
    lines += ["", "Validation losses (normalised pose MSE; tf = teacher forced, fr = free running, "
                  "with = retrieved candidates, without = null token):", ""]
    keys = [k for k in ("epoch", "step", "stage", "train_loss", "tf_with", "tf_without", "fr_with", "fr_without")
            if k in hist.get("last", {})]
    lines += ["| | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
    for name in ("first", "best", "last"):
        if name in hist:
            lines.append(f"| {name} | " + " | ".join(_fmt(hist[name].get(k)) for k in keys) + " |")
    if result is not None:
        fr = result["free_running"]
        lines += ["", "## Targets", "",
                  "Free running, every method scored as the runtime draws it"
                  + (" (joint positions rebuilt from the predicted rotations, above the data's lowest toe)" if result.get("rigid") else "")
                  + "; motion matching is the runtime controller with inertialization.", "", targets_table(result)]
        if "gain_vs_twin" in fr:
            lo, hi = fr["gain_vs_twin_ci95"]
            lines += ["", f"Retrieval gain against the no-retrieval twin (same recipe): "
                          f"{100 * fr['gain_vs_twin']:+.1f}% of the twin's loss, absolute [{lo:+.4f}, {hi:+.4f}] "
                          "(95% interval, clips then windows resampled); the null-token gain below is the same "
                          "model's ablation, reported beside it only."]
        gt = fr.get("ground_truth")
        if gt:
            lines += ["", "Ground truth on the same windows: " + ", ".join(f"{k} {_fmt(v)}" for k, v in gt.items())
                      + " (the floor of the Fréchet distance is `frechet_split_half`)."]
        per = fr.get("per_clip")
        if per:
            keys = ("joint_error_cm", "root_error_m", "joint_speed_ratio", "foot_skate_cm_s", "frechet")
            lines += ["", "### Per clip (free running)", "",
                      "| clip | method | windows | " + " | ".join(keys) + " |", "|---|---|---|" + "---|" * len(keys)]
            for clip, methods in per.items():
                for name in ("with", "no_retrieval_model", "motion_matching", "copy_previous"):
                    if name in methods:
                        label = "this model" if name == "with" else name.replace("_", " ")
                        lines.append(f"| {clip} | {label} | {methods['windows']} | "
                                     + " | ".join(_fmt(methods[name].get(k)) for k in keys) + " |")
        for title, key in (("Scripted sticks (runtime, drawn pose)", "scenarios"),
                           ("The same sticks, motion matching (the inertialized controller) with the same foot lock",
                            "scenarios_motion_matching")):
            sc = result.get(key)
            if not sc:
                continue
            keys = list(next(iter(sc.values())))
            lines += ["", f"### {title}", "",
                      "| scenario | " + " | ".join(k.replace("_", " ") for k in keys) + " |",
                      "|---|" + "---|" * len(keys)]
            lines += [f"| {name} | " + " | ".join(_fmt(v.get(k)) for k in keys) + " |" for name, v in sc.items()]
        if result.get("database_stride_ratio"):
            lines += ["", f"The database's own stride ratio: {_fmt(result['database_stride_ratio'])}."]
        if result.get("database_feet_down_share") is not None:
            lines += ["", f"The database's own feet-down share while standing: {_fmt(result['database_feet_down_share'])}."]
        crowds = [(label, result[key]) for label, key in (("this model", "crowd"), ("motion matching", "crowd_motion_matching"))
                  if result.get(key)]
        if crowds:
            keys = list(crowds[0][1])
            lines += ["", "### A crowd on wandering sticks (kinema demo crowd's)", "",
                      "| method | " + " | ".join(k.replace("_", " ") for k in keys) + " |", "|---|" + "---|" * len(keys)]
            lines += [f"| {label} | " + " | ".join(_fmt(c.get(k)) for k in keys) + " |" for label, c in crowds]
            lines += ["", "(fallen / sunk: characters whose hips went below 0.5 / 0.75 of the data's standing height.)"]
    lines += ["", "## Retrieval gain", ""]
    if result is None:
        lines += ["Not evaluated (run `kinema eval` and pass its JSON to `kinema card --eval`)."]
    else:
        lines += [f"Evaluated on {result['windows']} windows of {result['context']} context + {result['frames']} "
                  f"frames (stride {result['stride']}{', with mirrored clips' if result.get('mirrored') else ''}) "
                  f"of {_fmt([c.rsplit('/', 1)[-1] for c in result['clips']])}, database {result['database']}. "
                  "Gain = loss with null candidates minus loss with retrieved candidates (same model), "
                  "95% bootstrap interval (clips, then windows within them).", ""]
        lines += _table([(f"{r.replace('_', ' ')}", f"{result[r]['gain']:+.4f} "
                          f"[{result[r]['gain_ci95'][0]:+.4f}, {result[r]['gain_ci95'][1]:+.4f}] "
                          f"({100 * result[r]['gain_relative']:+.1f}% of the null loss)")
                         for r in ("teacher_forced", "free_running")], ("regime", "retrieval gain"))
        for r in ("teacher_forced", "free_running"):
            lines += ["", f"### {r.replace('_', ' ')}", ""] + _metrics_table(result[r])
        h = result["free_running"].get("horizons")
        if h:
            lines += ["", "### Free-running joint error by horizon", "",
                      "Character-space joint error (cm) averaged over the first N frames; in brackets the 95% "
                      "paired bootstrap interval of (other - this model): above 0 means this model is better.", ""]
            lines += ["| | " + " | ".join(f"{n} frames" for n in h["frames"]) + " |", "|---|" + "---|" * len(h["frames"])]
            for name, vals in h["joint_error_cm"].items():
                ci = h["other_minus_model_ci95"].get(name)
                label = "this model (retrieved)" if name == "with" else (
                    "null candidates (same model)" if name == "without" else name.replace("_", " "))
                cells = [f"{v:.2f}" + ("" if ci is None else f" [{ci[i][0]:+.2f}, {ci[i][1]:+.2f}]")
                         for i, v in enumerate(vals)]
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
        o = result["free_running"].get("oracle")
        if o:
            lines += ["", "### What the candidates carry: an oracle database", "",
                      "The same windows with a database that also holds the evaluated clips (their exact future "
                      "retrievable, nothing excluded). Uptake: the share of the way from this model's error to "
                      "motion matching's with that database that the oracle candidates take it (0: it ignores "
                      "what they carry; 1: it follows exact candidates as motion matching does).", ""]
            lines += ["| | " + " | ".join(f"{n} frames" for n in o["frames"]) + " |", "|---|" + "---|" * len(o["frames"])]
            for name, label in (("with", "this model, its database"), ("oracle", "this model, oracle database"),
                                ("motion_matching", "motion matching, oracle database")):
                lines.append(f"| {label} | " + " | ".join(f"{v:.2f}" for v in o["joint_error_cm"][name]) + " |")
            lines.append("| drop, 95% interval | " + " | ".join(f"[{lo:+.2f}, {hi:+.2f}]" for lo, hi in o["drop_ci95"])
                         + " |")
            lines.append("| uptake | " + " | ".join("-" if u is None else f"{u:.2f}" for u in o["uptake"]) + " |")
        st = result.get("stability")
        if st and st.get("windows"):
            lines += ["", "### Stability", ""]
            lines += _table([(k.replace("_", " "), v) for k, v in st.items()], ("long free-running rollouts", "value"))
    lines += ["", "## Provenance", ""]
    lines += _table([("checkpoint format", meta.get("format")), ("versions", json.dumps(meta.get("versions"))),
                     ("data", json.dumps(cfg.get("data", {}).get("clips"))),
                     ("reproduce", f"`{reproduce_command(cfg, out)}`"),
                     ("evaluation", None if result is None else result.get("command"))], ("field", "value"))
    return "\n".join(lines) + "\n"
