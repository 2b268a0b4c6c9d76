"""What a motion-matching database needs to know about a skeleton, and how to build it.

A :class:`DatabaseConfig` names the feet, toes and hips, the root rule
(:class:`kinema.features.root.RootConfig`), the frame rate, the trajectory sample frames,
the feature weights and the contact thresholds. Presets exist for LaFAN1 and the
Bandai-Namco dataset; any other skeleton needs a small JSON file::

    {"base": "lafan1", "left_foot": "LFoot", "right_foot": "RFoot",
     "root": {"position_joint": "Pelvis"}}

(``base`` optional; other keys override it; ``root`` keys override the base's root rule).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from kinema.errors import KinemaError
from kinema.features.root import RootConfig


@dataclass(frozen=True)
class DatabaseConfig:
    """Skeleton roles and build settings of a motion-matching database.

    Attributes:
        name: preset or user label (part of the fingerprint).
        left_foot, right_foot: ankle joints of the foot features (MM uses the ankles).
        left_toe, right_toe: joints with contact labels.
        hips: joint of the hip-velocity feature.
        root: the root (simulation bone) rule.
        fps: database frame rate; clips are resampled to it (same duration, no speed-up).
        trajectory_frames: future frames of the trajectory features (at ``fps``).
        foot_position_weight, foot_velocity_weight, hip_velocity_weight,
        trajectory_position_weight, trajectory_direction_weight: feature group weights
            (MM: 0.75, 1, 1, 1, 1.5).
        contact_speed: toe speed (m/s) below which a toe is in contact (MM: 0.15).
        contact_height: toe height (m) below which it may be in contact (None: no test).
        contact_filter: median filter length in frames (MM: 6; even lengths become odd).
        pose_joints: joints whose root-space positions are matched too (one extra feature
            group before the trajectory; empty in Holden's features). Feet and hip velocity
            alone pick poses far from the current one when the body does something the feet
            do not show (on LaFAN1's test take the nearest row by these features is 20 cm
            away on average, the nearest by pose 7 cm).
        pose_joint_weight: weight of that group.
        trim_calibration: drop the calibration T-pose a take opens with
            (:func:`kinema.features.calibration.calibration_frames`; LaFAN1 takes hold one
            for 2-4 s). Off in the presets, so the databases the shipped models were trained
            on keep their fingerprints; ``kinema db build --trim-calibration`` turns it on.
        carry_above_hips: place every joint above ``hips`` (a BVH top joint the hips hang
            from, such as Bandai-Namco's ``joint_Root``, which stays at the world origin) on
            the root, facing its way, before the pose is taken: its root-space position is
            then 0 and its rotation the identity in every row, its velocity the root's, instead
            of the world origin seen from the character (a world position and heading the
            network reads back; protocol, session 45: 68.6 m, 35 std, after a 5-min idle). Off
            unless set, so the databases the shipped models were trained on keep their
            fingerprints.
    """

    name: str = "custom"
    left_foot: str = "LeftFoot"
    right_foot: str = "RightFoot"
    left_toe: str = "LeftToe"
    right_toe: str = "RightToe"
    hips: str = "Hips"
    root: RootConfig = field(default_factory=RootConfig.lafan1)
    fps: float = 60.0
    trajectory_frames: tuple[int, ...] = (20, 40, 60)
    foot_position_weight: float = 0.75
    foot_velocity_weight: float = 1.0
    hip_velocity_weight: float = 1.0
    trajectory_position_weight: float = 1.0
    trajectory_direction_weight: float = 1.5
    contact_speed: float = 0.15
    contact_height: float | None = None
    contact_filter: int = 6
    pose_joints: tuple[str, ...] = ()
    pose_joint_weight: float = 1.0
    trim_calibration: bool = False
    carry_above_hips: bool = False

    @classmethod
    def preset(cls, name: str) -> DatabaseConfig:
        """``"lafan1"``, ``"lafan1_pose"`` (LaFAN1 plus hands, head, knees and chest matched),
        ``"bandai"`` or ``"games105"`` (the bundled GAMES-105 sample)."""
        if name == "lafan1":
            return cls(name="lafan1")
        if name == "lafan1_pose":
            return cls(name="lafan1_pose", pose_joints=LAFAN1_POSE_JOINTS)
        if name == "games105":
            return cls(name="games105", left_foot="lAnkle", right_foot="rAnkle", left_toe="lToeJoint",
                       right_toe="rToeJoint", hips="RootJoint",
                       root=RootConfig(position_joint="RootJoint", facing="lines", left_hip="lHip", right_hip="rHip",
                                       left_shoulder="lShoulder", right_shoulder="rShoulder", smoothing="savgol",
                                       window=31, order=3))
        if name == "bandai":
            return cls(name="bandai", left_foot="Foot_L", right_foot="Foot_R", left_toe="Toes_L",
                       right_toe="Toes_R", hips="Hips", root=RootConfig.bandai())
        raise KinemaError(f"unknown database preset {name!r}; presets: {', '.join(PRESETS)}")

    @classmethod
    def from_dict(cls, data: dict, source: str = "config") -> DatabaseConfig:
        """From a dict (``base`` preset optional, other keys override; ``root`` a dict)."""
        data = dict(data)
        base = cls.preset(data.pop("base")) if "base" in data else cls()
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise KinemaError(f"{source}: unknown database config keys {unknown}; known: {sorted(known)}")
        if "root" in data:
            root = data.pop("root")
            if not isinstance(root, dict):
                raise KinemaError(f"{source}: 'root' must be an object of RootConfig fields")
            rknown = {f.name for f in fields(RootConfig)}
            bad = sorted(set(root) - rknown)
            if bad:
                raise KinemaError(f"{source}: unknown root config keys {bad}; known: {sorted(rknown)}")
            if "facing_axis" in root:
                root["facing_axis"] = tuple(root["facing_axis"])
            data["root"] = replace(base.root, **root)
        if "trajectory_frames" in data:
            data["trajectory_frames"] = tuple(int(t) for t in data["trajectory_frames"])
        if "pose_joints" in data:
            data["pose_joints"] = tuple(str(j) for j in data["pose_joints"])
        return replace(base, **data)

    @classmethod
    def from_file(cls, path: str | Path) -> DatabaseConfig:
        """From a JSON file (see the module docstring)."""
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise KinemaError(f"{path}: cannot read database config: {e}") from None
        if not isinstance(data, dict):
            raise KinemaError(f"{path}: database config must be a JSON object")
        return cls.from_dict(data, str(path))

    @classmethod
    def resolve(cls, spec: str | Path | DatabaseConfig | None) -> DatabaseConfig:
        """A preset name, a JSON file path, a config, or None (LaFAN1)."""
        if spec is None:
            return cls.preset("lafan1")
        if isinstance(spec, DatabaseConfig):
            return spec
        if str(spec) in PRESETS:
            return cls.preset(str(spec))
        return cls.from_file(spec)

    def to_dict(self) -> dict:
        """Plain JSON-able dict (round-trips through :meth:`from_dict`)."""
        d = asdict(self)
        d["root"]["facing_axis"] = list(d["root"]["facing_axis"])
        d["trajectory_frames"] = list(d["trajectory_frames"])
        if self.pose_joints:
            d["pose_joints"] = list(self.pose_joints)
        else:  # absent when unused, so databases built before the option keep their fingerprints
            del d["pose_joints"], d["pose_joint_weight"]
        if not self.trim_calibration:   # likewise
            del d["trim_calibration"]
        if not self.carry_above_hips:   # likewise
            del d["carry_above_hips"]
        return d

    def canonical_json(self) -> str:
        """Sorted-key compact JSON: the form hashed into the fingerprint."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))


PRESETS = ("lafan1", "lafan1_pose", "bandai", "games105")
LAFAN1_POSE_JOINTS = ("LeftHand", "RightHand", "Head", "LeftLeg", "RightLeg", "Spine2")
