"""Rendered images against what the scene implies: projected joints land on the character,
the background differs, shadows darken the floor, every effect renders without GL errors."""
from __future__ import annotations

import numpy as np
import pytest
from render_util import neighbourhood, render

import kinema
from kinema.data import shared_path
from kinema.render.characters import pose_from_motion, skinning_matrices, top4_influences

TINT = (0.95, 0.3, 0.2, 1.0)
BODY = (0.85, 0.55, 0.35, 1.0)


def reddish(px: np.ndarray, margin: int = 25) -> np.ndarray:
    """Pixels clearly redder than green and blue (the tint/body colours; never sky or floor)."""
    p = px.astype(int)
    return (p[..., 0] - np.maximum(p[..., 1], p[..., 2])) > margin


def no_effects(r):
    for k in ("shadows", "ssao", "bloom", "fxaa"):
        setattr(r.effects, k, False)


def test_geno_bind_pose_joints_on_character_background_elsewhere(fresh, geno):
    model = fresh.model_for(geno)
    rot, pos = model.bind_pose()
    img = render(fresh, lambda r: r.draw_character(geno, rot, pos, tint=TINT))
    assert fresh.gl_errors() == []
    assert img.shape == (320, 480, 3) and img.dtype == np.uint8
    px, _, vis = fresh.project(pos)
    assert vis.all()
    hit = reddish(neighbourhood(img, px, 1)).any(axis=1)
    names = geno.skeleton.names
    core = [names.index(n) for n in ("Hips", "Spine1", "Neck", "Head", "LeftUpLeg", "RightLeg",
                                     "LeftArm", "RightForeArm", "LeftFoot")]
    assert hit[core].all(), [names[i] for i in core if not hit[i]]
    assert hit.mean() > 0.9
    # the same points moved 1.5 m sideways are background: not character-coloured
    px_off, _, vis_off = fresh.project(pos + [1.5, 0, 0])
    off = reddish(neighbourhood(img, px_off[vis_off], 0)).any(axis=1)
    assert off.mean() < 0.05
    # the sky above the head is the sky colour, the character silhouette is large enough
    sky = np.asarray(fresh.effects.sky_color) * 255
    assert np.abs(img[3, 5:475].astype(float) - sky).max() < 40
    assert reddish(img).sum() > 2000


def test_gpu_skinning_moves_vertices_like_cpu_lbs(fresh, geno, shared_data):
    """T-pose from geno_stance.bvh: CPU linear-blend skinning predicts where the moved arm
    vertices are; the GPU image has the character there, and not where the bind-pose arms were."""
    stance = kinema.load(shared_data / "characters" / "geno" / "geno_stance.bvh")
    rot, pos = pose_from_motion(geno, stance, 1)
    bones = skinning_matrices(geno, rot, pos).astype(np.float64)
    mesh = geno.meshes[0]
    j4, w4 = top4_influences(mesh.joints, mesh.weights)
    v = np.c_[mesh.positions, np.ones(mesh.num_vertices)]
    skinned = np.einsum("vk,vkij,vj->vi", w4, bones[j4.astype(int)], v)[:, :3]
    moved = np.linalg.norm(skinned - mesh.positions, axis=-1) > 0.25
    assert moved.sum() > 300                                  # the arms moved
    fresh.camera.set_fixed([0.0, 1.1, 3.4], [0.0, 1.0, 0.0])
    fresh.camera.snap()
    img = render(fresh, lambda r: r.draw_character(geno, rot, pos, tint=TINT))
    sel = np.nonzero(moved)[0][::7]
    px_new, _, vis = fresh.project(skinned[sel])
    assert vis.all()
    on_new = reddish(neighbourhood(img, px_new, 1)).any(axis=1)
    assert on_new.mean() > 0.9
    px_old, _, _ = fresh.project(mesh.positions[sel])
    on_old = reddish(neighbourhood(img, px_old, 0)).any(axis=1)
    assert on_old.mean() < 0.3


def test_lafan1_frame_procedural_body_and_skinned_character(fresh, lafan_walk):
    frame = 400
    g = lafan_walk.global_positions()[frame]
    g = g - g[0] * [1, 0, 1]
    fresh.camera.set_fixed([2.2, 1.4, 3.0], [0.0, 0.9, 0.0])
    fresh.camera.snap()
    img = render(fresh, lambda r: r.draw_body(g, lafan_walk.parents, BODY))
    px, _, vis = fresh.project(g)
    assert vis.all()
    hit = reddish(neighbourhood(img, px, 1), margin=20).any(axis=1)
    assert hit.mean() > 0.9, [n for n, h in zip(lafan_walk.joint_names, hit) if not h]
    path = shared_path("characters", "lafan1_character", "character.bin")
    if path is None:
        return
    from kinema.io.character_bin import load_character
    ch = load_character(path)
    rot, pos = pose_from_motion(ch, lafan_walk, frame)
    pos = pos - np.asarray(lafan_walk.global_positions()[frame][0]) * [1, 0, 1]
    img = render(fresh, lambda r: r.draw_character(ch, rot, pos, tint=TINT))
    idx = [ch.skeleton.names.index(n) for n in lafan_walk.joint_names]
    px, _, vis = fresh.project(pos[idx])
    hit = reddish(neighbourhood(img, px, 1)).any(axis=1)
    assert hit.mean() > 0.85, [n for n, h in zip(lafan_walk.joint_names, hit) if not h]


def test_shadow_darkens_the_floor_under_the_character(fresh, geno):
    model = fresh.model_for(geno)
    rot, pos = model.bind_pose()
    sun = np.asarray(fresh.effects.sun_direction, float)
    sun /= np.linalg.norm(sun)
    chest = pos[geno.skeleton.names.index("Spine2")]
    shadow = chest - sun * (chest[1] / sun[1])                # where the chest's shadow lands
    fresh.camera.set_fixed([-2.5, 2.6, -3.0], [shadow[0], 0.3, shadow[2]])
    # the orbit/follow focus far away: a fixed camera's shadows follow what it looks at
    # (they followed the focus and vanished when an earlier test had left it elsewhere)
    fresh.camera.set_focus([40.0, 0.9, -40.0])
    fresh.camera.snap()
    no_effects(fresh)
    images = {}
    for on in (False, True):
        fresh.effects.shadows = on
        images[on] = render(fresh, lambda r: r.draw_character(geno, rot, pos, tint=TINT)).astype(float)
        assert fresh.gl_errors() == []
    px, _, vis = fresh.project(np.array([shadow, shadow + [2.0, 0, -1.5]]))
    assert vis.all()
    lum = {on: neighbourhood(images[on], px, 2).mean(axis=(1, 2)) for on in images}
    assert not reddish(neighbourhood(images[True].astype(np.uint8), px[:1], 2)).any()  # floor, not body
    assert lum[True][0] < 0.8 * lum[False][0]                 # in the shadow: darker
    assert lum[True][1] == pytest.approx(lum[False][1], rel=0.03)  # open floor: unchanged


CONFIGS = {
    "none": {},
    "shadows": {"shadows": True},
    "ssao": {"ssao": True},
    "bloom": {"bloom": True},
    "fxaa": {"fxaa": True},
    "all": {"shadows": True, "ssao": True, "bloom": True, "fxaa": True},
}


@pytest.fixture(scope="module")
def effect_images(renderer, geno):
    """One image per effect configuration of the same scene."""
    from kinema.render import Effects
    renderer.effects.__dict__.update(Effects().__dict__)
    renderer.camera.halflife = 0.0
    renderer.camera.set_fixed([1.6, 1.3, 3.6], [0.0, 0.9, 0.0])
    renderer.camera.snap()
    model = renderer.model_for(geno)
    rot, pos = model.bind_pose()
    renderer.gl_errors()

    def scene(r):
        r.draw_character(geno, rot, pos, tint=(1, 1, 1, 1))
        r.draw_skeleton(pos + [1.0, 0, 0], geno.skeleton.parents)
        r.debug.spheres([[-1.0, 0.3, 0.5]], 0.3, (0.9, 0.9, 0.95))

    out = {}
    for name, cfg in CONFIGS.items():
        for k in ("shadows", "ssao", "bloom", "fxaa"):
            setattr(renderer.effects, k, bool(cfg.get(k, False)))
        out[name] = (render(renderer, scene).astype(float), renderer.gl_errors())
    return out


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_effect_renders_without_gl_errors(effect_images, name):
    img, errors = effect_images[name]
    assert errors == []
    assert img.std() > 10                                     # a real picture, not a flat fill
    if name != "none":
        base = effect_images["none"][0]
        assert np.abs(img - base).mean() > 0.05               # the effect changed something


def test_effects_do_what_they_should(effect_images):
    base = effect_images["none"][0].mean(axis=2)
    ssao = effect_images["ssao"][0].mean(axis=2)
    bloom = effect_images["bloom"][0].mean(axis=2)
    fxaa = effect_images["fxaa"][0].mean(axis=2)
    shadows = effect_images["shadows"][0].mean(axis=2)
    assert ssao.mean() < base.mean() and (ssao <= base + 1).mean() > 0.99    # only darkens
    assert bloom.mean() > base.mean() and (bloom >= base - 1).mean() > 0.99  # only brightens
    assert shadows.mean() < base.mean()
    # FXAA touches edges only: most pixels identical, the changed ones sit on strong gradients
    changed = np.abs(fxaa - base) > 2
    assert 0 < changed.mean() < 0.1
    gy, gx = np.gradient(base)
    edge = np.hypot(gx, gy)
    assert edge[changed].mean() > 4 * edge.mean()


def test_fxaa_moves_edges_towards_a_supersampled_render(fresh, geno, shared_data):
    """Reference: the same frame at twice the size, averaged over 2x2 pixels. FXAA must
    cut the error on silhouette pixels clearly and leave the rest alone."""
    stance = kinema.load(shared_data / "characters" / "geno" / "geno_stance.bvh")
    rot, pos = pose_from_motion(geno, stance, 1)
    no_effects(fresh)
    fresh.effects.floor = False
    w, h = fresh.width, fresh.height
    draw = lambda r: r.draw_character(geno, rot, pos, tint=TINT)  # noqa: E731
    try:
        fresh.resize(2 * w, 2 * h)
        ref = render(fresh, draw).astype(float).reshape(h, 2, w, 2, 3).mean(axis=(1, 3))
    finally:
        fresh.resize(w, h)
    plain = render(fresh, draw).astype(float)
    fresh.effects.fxaa = True
    fxaa = render(fresh, draw).astype(float)
    assert fresh.gl_errors() == []
    edge = np.abs(plain - ref).max(-1) > 20
    assert edge.sum() > 200
    err_plain = np.abs(plain - ref).mean(-1)
    err_fxaa = np.abs(fxaa - ref).mean(-1)
    assert err_fxaa[edge].mean() < 0.7 * err_plain[edge].mean()
    assert err_fxaa[~edge].mean() < err_plain[~edge].mean() + 0.5


def test_textured_character_shows_its_texture(fresh, sample_data):
    """The Fox's base-colour texture: vertices whose texel is orange render orange, vertices
    whose texel is pale render pale (lit, so compare hue, not exact values)."""
    fox = kinema.load_character(sample_data / "fox" / "fox.glb")
    mesh = fox.meshes[0]
    assert mesh.texture is not None and mesh.uvs is not None
    rot, pos = fresh.model_for(fox).bind_pose()
    lo, hi = mesh.positions.min(0), mesh.positions.max(0)
    centre, size = (lo + hi) / 2, float(np.linalg.norm(hi - lo))
    no_effects(fresh)
    fresh.camera.far = 10 * size                               # the Fox is in centimetres
    try:
        fresh.camera.set_fixed(centre + np.array([1.0, 0.25, 0.35]) * size * 0.8, centre)
        fresh.camera.snap()
        img = render(fresh, lambda r: r.draw_character(fox, rot, pos))
    finally:
        fresh.camera.far = 200.0
    assert fresh.gl_errors() == []
    th, tw = mesh.texture.shape[:2]
    uv = mesh.uvs
    texel = mesh.texture[np.clip((uv[:, 1] * th).astype(int), 0, th - 1),
                         np.clip((uv[:, 0] * tw).astype(int), 0, tw - 1), :3].astype(int)
    px, depth, vis = fresh.project(mesh.positions)
    # keep vertices facing the camera and in front (their pixel shows them, not something nearer)
    to_cam = fresh.camera.camera.position - mesh.positions
    front = np.einsum("ij,ij->i", mesh.normals, to_cam) > 0
    sel = vis & front
    orange = sel & (texel[:, 0] - texel[:, 2] > 120)
    pale = sel & (texel.min(axis=1) > 190)
    assert orange.sum() > 50 and pale.sum() > 10
    rgb = lambda m: neighbourhood(img, px[m], 0)[:, 0].astype(int)  # noqa: E731
    warm = lambda c: (c[:, 0] - c[:, 2]) / (c.max(axis=1) + 1)        # noqa: E731
    assert np.median(warm(rgb(orange))) > 0.35
    assert np.median(warm(rgb(pale))) < np.median(warm(rgb(orange))) - 0.2


def test_distant_characters_use_the_simplified_mesh_without_visible_change(fresh, geno):
    """A small, far character drawn from its clustered LOD covers the same pixels as the
    full mesh; the full mesh is used when LOD is off."""
    model = fresh.model_for(geno)
    rot, pos = model.bind_pose()
    assert model.meshes[0].shadow_vao is not model.meshes[0].vao
    assert model.meshes[0].shadow_vao.index_count < 0.8 * model.meshes[0].vao.index_count
    no_effects(fresh)
    far = pos + [0.0, 0.0, -14.0]
    fresh.camera.set_fixed([0.0, 1.0, 4.0], [0.0, 0.9, -14.0])
    fresh.camera.snap()
    masks = {}
    for lod in (0.0, 1e9):
        fresh.effects.lod_pixels = lod
        img = render(fresh, lambda r: r.draw_character(geno, rot, far, tint=TINT))
        masks[lod] = reddish(img)
    full, simple = masks[0.0], masks[1e9]
    assert 150 < full.sum() < 5000                              # a small figure
    iou = (full & simple).sum() / (full | simple).sum()
    assert iou > 0.85
