"""Rotations shared by the maths tests: random ones and the edge cases that break naive code."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

ORDERS = ("xyz", "xzy", "yxz", "yzx", "zxy", "zyx")


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def edge_quaternions() -> np.ndarray:
    """(N, 4) float64 (w, x, y, z): identity, exact 180-degree turns about each axis and
    random axes, 90-degree turns, nearly 180 degrees, tiny angles, gimbal lock of every
    Euler order; each also negated (antipodal)."""
    rng = np.random.default_rng(7)
    axes = np.concatenate([np.eye(3), -np.eye(3), _unit(rng.normal(size=(6, 3)))])
    qs = [np.array([1.0, 0, 0, 0])]
    for axis in axes:
        for ang in (np.pi, np.pi / 2, np.pi - 1e-9, 1e-12, 1e-8, 1e-5, 2 * np.pi - 1e-7):
            qs.append(np.concatenate([[np.cos(ang / 2)], np.sin(ang / 2) * axis]))
        qs.append(np.concatenate([[0.0], axis]))  # exactly 180 degrees, w = 0 exactly
    for order in ORDERS:
        for mid in (np.pi / 2, -np.pi / 2):
            for a, c in ((0.3, -0.7), (0.0, 0.0), (2.5, 2.9), (-3.0, 1.0)):
                qs.append(Rotation.from_euler(order.upper(), [a, mid, c]).as_quat(scalar_first=True))
    qs = np.array(qs)
    return np.concatenate([qs, -qs])


@pytest.fixture(scope="module")
def edges() -> np.ndarray:
    return edge_quaternions()


@pytest.fixture(scope="module")
def randoms() -> np.ndarray:
    """(500, 4) random unit quaternions, float64, both signs of w."""
    q = Rotation.random(500, random_state=3).as_quat(scalar_first=True)
    q[::2] *= -1
    return q


@pytest.fixture(scope="module")
def all_rotations(edges, randoms) -> np.ndarray:
    return np.concatenate([edges, randoms])


def sign_free_error(a: np.ndarray, b: np.ndarray) -> float:
    """Largest distance between quaternions taken as rotations (q ~ -q)."""
    d1 = np.abs(np.asarray(a) - np.asarray(b)).max(-1)
    d2 = np.abs(np.asarray(a) + np.asarray(b)).max(-1)
    return float(np.minimum(d1, d2).max())


def angle_error(a: np.ndarray, b: np.ndarray) -> float:
    """Largest difference between angles modulo 2 pi."""
    d = (np.asarray(a) - np.asarray(b) + np.pi) % (2 * np.pi) - np.pi
    return float(np.abs(d).max())


@pytest.fixture(scope="session")
def same_rotation():
    return sign_free_error


@pytest.fixture(scope="session")
def angle_diff():
    return angle_error
