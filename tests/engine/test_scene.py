"""Scene, entities and components: hierarchy transforms, queries, lifecycle, destruction."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from kinema.engine import Component, Scene
from kinema.errors import KinemaError
from kinema.maths import quat


def _wxyz(r: Rotation) -> np.ndarray:
    x, y, z, w = r.as_quat().T
    return np.stack([w, x, y, z], -1)


def test_parent_moves_child():
    scene = Scene()
    parent = scene.create_entity("parent", position=(1, 0, 0))
    child = parent.create_child("child", position=(0, 0, 2))
    np.testing.assert_allclose(child.world_position, [1, 0, 2], atol=1e-6)
    parent.position = (0, 5, 0)
    np.testing.assert_allclose(child.world_position, [0, 5, 2], atol=1e-6)
    parent.rotation = quat.from_axis_angle(np.array([0.0, 1.0, 0.0]), np.pi / 2)  # +Z -> +X
    np.testing.assert_allclose(child.world_position, [2, 5, 0], atol=1e-6)
    parent.scale = 3.0
    np.testing.assert_allclose(child.world_position, [6, 5, 0], atol=1e-5)
    np.testing.assert_allclose(child.position, [0, 0, 2])  # local unchanged


def test_world_transforms_match_matrix_oracle():
    """A random 200-entity tree against 4x4 matrix products built with scipy (uniform scales)."""
    rng = np.random.default_rng(0)
    scene = Scene(capacity=4)  # force growth
    ents, mats = [], []
    for i in range(200):
        parent = ents[rng.integers(len(ents))] if ents and rng.random() < 0.9 else None
        pos = rng.normal(size=3)
        rot = Rotation.random(random_state=i)
        s = rng.uniform(0.5, 2.0)
        e = scene.create_entity(f"e{i}", parent=parent, position=pos, rotation=_wxyz(rot), scale=s)
        local = np.eye(4)
        local[:3, :3] = rot.as_matrix() * s
        local[:3, 3] = pos
        mats.append(local if parent is None else mats[ents.index(parent)] @ local)
        ents.append(e)
    for e, m in zip(ents, mats):
        np.testing.assert_allclose(e.world_matrix, m, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(e.world_position, m[:3, 3], rtol=1e-4, atol=1e-4)
        r = Rotation.from_matrix(m[:3, :3] / np.cbrt(np.linalg.det(m[:3, :3])))
        assert abs(abs(np.dot(e.world_rotation, _wxyz(r))) - 1) < 1e-5


def test_world_setters_and_reparent_keep_world():
    scene = Scene()
    a = scene.create_entity("a", position=(1, 2, 3), rotation=_wxyz(Rotation.from_euler("y", 40, degrees=True)),
                            scale=2.0)
    b = scene.create_entity("b", position=(-1, 0, 4), rotation=_wxyz(Rotation.from_euler("x", 25, degrees=True)))
    before_p, before_r = b.world_position, b.world_rotation
    b.set_parent(a, keep_world=True)
    assert b.parent is a and b in a.children and b not in scene.roots
    np.testing.assert_allclose(b.world_position, before_p, atol=1e-5)
    assert abs(abs(np.dot(b.world_rotation, before_r)) - 1) < 1e-6
    b.world_position = (7, 8, 9)
    np.testing.assert_allclose(b.world_position, [7, 8, 9], atol=1e-5)
    with pytest.raises(KinemaError):
        a.set_parent(b)  # cycle
    b.set_parent(None, keep_world=True)
    np.testing.assert_allclose(b.world_position, [7, 8, 9], atol=1e-5)
    assert b in scene.roots and b not in a.children
    a.destroy()
    with pytest.raises(KinemaError):
        b.set_parent(a)


def test_queries_by_name_tag_and_type():
    class Mass(Component):
        def __init__(self, kg: float) -> None:
            self.kg = kg

    class Heavy(Mass):
        pass

    scene = Scene()
    a = scene.create_entity("body", tags=("planet",))
    b = scene.create_entity("body")
    c = scene.create_entity("moon", parent=a, tags=("planet", "small"))
    a.add(Mass, 1.0)
    c.add(Heavy(5.0))
    assert scene.find("body") is a and scene.find_all("body") == [a, b]
    assert scene.find("nothing") is None
    assert scene.with_tag("planet") == [a, c] and scene.with_tag("small") == [c]
    assert [m.kg for m in scene.components(Mass)] == [1.0, 5.0]
    assert [m.kg for m in scene.components(Heavy)] == [5.0]
    assert c.get(Mass).kg == 5.0 and b.get(Mass) is None
    with pytest.raises(KinemaError):
        b.require(Mass)
    with pytest.raises(KinemaError):
        b.add(c.get(Heavy))  # already attached
    a.destroy()
    assert scene.find("body") is b and scene.with_tag("planet") == [] and scene.components(Mass) == []


def test_lifecycle_order():
    log: list[str] = []

    class Probe(Component):
        def __init__(self, tag: str) -> None:
            self.tag = tag

        def on_add(self): log.append(f"{self.tag}.add")
        def on_start(self): log.append(f"{self.tag}.start")
        def update(self, dt): log.append(f"{self.tag}.update")
        def late_update(self, dt): log.append(f"{self.tag}.late")
        def draw(self, renderer): log.append(f"{self.tag}.draw")
        def gui(self, ui): log.append(f"{self.tag}.gui")
        def on_destroy(self): log.append(f"{self.tag}.destroy")

    class Early(Probe):
        order = -1

    scene = Scene()
    e = scene.create_entity("e")
    e.add(Probe, "p")
    e.add(Early, "x")
    assert log == ["p.add", "x.add"]
    scene.update(1 / 60)
    assert log[2:] == ["p.start", "x.start", "x.update", "p.update", "x.late", "p.late"]
    del log[:]
    scene.draw(None)
    scene.gui(None)
    assert log == ["x.draw", "p.draw", "x.gui", "p.gui"]
    del log[:]
    e.destroy()
    assert sorted(log) == ["p.destroy", "x.destroy"]
    del log[:]
    scene.update(1 / 60)
    assert log == []


def test_destroy_during_update_is_deferred_and_safe():
    seen: list[str] = []

    class Killer(Component):
        def update(self, dt):
            seen.append("killer")
            victim = self.scene.find("victim")
            if victim is not None:
                victim.destroy()
                # still readable until the end of the step
                assert victim.world_position.shape == (3,)
                self.scene.create_entity("spawned").add(Counter())

    class Counter(Component):
        def __init__(self):
            self.n = 0
            self.destroyed = False

        def update(self, dt):
            self.n += 1
            seen.append(self.entity.name)

        def on_destroy(self):
            self.destroyed = True

    scene = Scene()
    scene.create_entity("killer").add(Killer())
    victim = scene.create_entity("victim")
    vc = victim.add(Counter())
    child = victim.create_child("child")
    cc = child.add(Counter())
    scene.start()
    slots_before = scene.transforms.count
    scene.update(0.1)
    # the victim and its child were removed at the end of the step without ever updating
    assert vc.n == 0 and cc.n == 0 and vc.destroyed and cc.destroyed
    assert scene.find("victim") is None and scene.find("child") is None and not victim.alive
    assert scene.transforms.count == slots_before - 2 + 1
    spawned = scene.find("spawned").get(Counter)
    assert spawned.n == 0  # added mid-step: starts next step
    scene.update(0.1)
    assert spawned.n == 1 and seen == ["killer", "killer", "spawned"]


def test_freed_slots_are_reused_and_transforms_reset():
    scene = Scene(capacity=2)
    a = scene.create_entity("a", position=(1, 1, 1), scale=4)
    slot = a.slot
    a.destroy()
    b = scene.create_entity("b")
    assert b.slot == slot
    np.testing.assert_array_equal(b.world_position, [0, 0, 0])
    np.testing.assert_array_equal(b.world_scale, [1, 1, 1])


def test_scenes_are_independent():
    s1, s2 = Scene("one"), Scene("two")
    s1.create_entity("x", position=(1, 0, 0))
    s2.create_entity("x", position=(2, 0, 0))
    assert len(s1) == 1 and len(s2) == 1
    assert s1.find("x").world_position[0] == 1 and s2.find("x").world_position[0] == 2
    with pytest.raises(KinemaError):
        s1.create_entity("y", parent=s2.find("x"))


def test_adding_entities_is_linear():
    """Adding N entities reallocates the transform buffers O(log N) times (doubling), and the
    name/tag/children indexes are dicts/lists appended to, so the total cost is O(N)."""
    scene = Scene(capacity=1)
    grows: list[int] = []
    original = scene.transforms._grow
    scene.transforms._grow = lambda cap: (grows.append(cap), original(cap))[1]
    root = scene.create_entity("root", tags=("t",))
    n = 20000
    for i in range(n):
        scene.create_entity("e", parent=root if i % 2 else None, tags=("t",))
    assert len(scene) == n + 1 and len(root.children) == n // 2
    assert len(grows) <= int(np.ceil(np.log2(n + 1))) + 1
    assert grows == sorted(grows) and all(b == 2 * a for a, b in zip(grows, grows[1:]))
    assert len(scene.with_tag("t")) == n + 1
    np.testing.assert_array_equal(scene.find_all("e")[-1].world_position, [0, 0, 0])
    # destroying them one by one is O(1) each as well (children are an ordered dict, slots a free list)
    for e in root.children[::-1]:
        e.destroy()
    assert root.children == [] and len(scene) == n // 2 + 1 and scene.transforms.count == n // 2 + 1


def test_remove_component_during_update_is_deferred():
    log: list[str] = []

    class A(Component):
        def update(self, dt):
            log.append("a")
            b = self.entity.get(B)
            if b is not None:
                self.entity.remove(b)

    class B(Component):
        def update(self, dt):
            log.append("b")

        def on_destroy(self):
            log.append("b.destroy")

    scene = Scene()
    e = scene.create_entity("e")
    e.add(A())
    b = e.add(B())
    scene.update(0.1)
    assert log == ["a", "b.destroy"] and e.get(B) is None and scene.components(B) == []
    assert b.entity is e  # still knows where it was, but is gone from the scene
    scene.update(0.1)
    assert log == ["a", "b.destroy", "a"]
    with pytest.raises(KinemaError):
        e.remove(b)
