"""Recording frames (from the framebuffer, via ``Renderer.capture``) to MP4 or PNG sequences."""
from __future__ import annotations

from pathlib import Path

import imageio.v2 as imageio
import numpy as np

from kinema.errors import KinemaError


class Recorder:
    """Write (H, W, 3) uint8 frames to ``path``.

    ``*.mp4`` (or ``.mkv``, ``.mov``, ``.avi``) goes through imageio-ffmpeg (H.264,
    yuv420p: odd sizes are padded to even ones by one pixel); any other path is a folder
    that receives ``frame_00000.png``, ``frame_00001.png``, ...

    Args:
        path: output file or folder.
        fps: frames per second of the video.
        quality: imageio-ffmpeg quality 0..10 for videos.
    """

    VIDEO_SUFFIXES = {".mp4", ".mkv", ".mov", ".avi"}

    def __init__(self, path: str | Path, fps: float = 30.0, quality: float = 8.0):
        self.path = Path(path)
        self.fps = float(fps)
        self.quality = quality
        self.count = 0
        self.video = self.path.suffix.lower() in self.VIDEO_SUFFIXES
        self._writer = None
        if self.video:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        else:
            self.path.mkdir(parents=True, exist_ok=True)

    def add(self, frame: np.ndarray) -> None:
        """Append one frame."""
        f = np.asarray(frame)
        if f.ndim != 3 or f.shape[2] not in (3, 4) or f.dtype != np.uint8:
            raise KinemaError(f"recorder {self.path}: frames must be (H, W, 3) uint8, got {f.shape} {f.dtype}")
        if self.video:
            h, w = f.shape[:2]
            if h % 2 or w % 2:
                f = np.pad(f, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")
            if self._writer is None:
                self._writer = imageio.get_writer(str(self.path), fps=self.fps, codec="libx264",
                                                  quality=self.quality, pixelformat="yuv420p",
                                                  macro_block_size=1, ffmpeg_log_level="error")
            self._writer.append_data(f[..., :3])
        else:
            imageio.imwrite(str(self.path / f"frame_{self.count:05d}.png"), f)
        self.count += 1

    def close(self) -> None:
        """Finish the file (videos are only complete after this)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
