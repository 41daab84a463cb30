"""An episode's text drawn as an RGB image, for ``render_mode="rgb_array"`` (what stable-baselines3's
``make_vec_env`` asks of an environment given by name, and what Gymnasium's ``RecordVideo`` records).

The text is the ``"ansi"`` rendering (``-`` at splits, ``|`` at the cursor), drawn on a grid of
fixed cells so that every frame of an environment has the same size (a video needs that), whatever
the text: ``LINE_CHARS`` characters a line, as many lines as the longest rendering of ``max_len``
characters takes.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from PIL import Image, ImageDraw, ImageFont

LINE_CHARS = 64
"""Characters per line of the image."""
CELL = (8, 16)
"""Width and height in pixels of one character's cell."""
MARGIN = 8
"""Pixels of white around the text."""
SIDE = 16
"""Both sides of the image are multiples of this, as video encoders want them."""


def frame_shape(max_len: int) -> tuple[int, int, int]:
    """``(height, width, 3)`` of the frames of an environment whose texts have at most ``max_len``
    characters (the ``"ansi"`` rendering has at most ``2 * max_len - 1``)."""
    lines = math.ceil((2 * max_len - 1) / LINE_CHARS)
    height = _round_up(lines * CELL[1] + 2 * MARGIN)
    width = _round_up(LINE_CHARS * CELL[0] + 2 * MARGIN)
    return height, width, 3


def text_frame(text: str, max_len: int) -> np.ndarray:
    """``text`` drawn black on white in a ``frame_shape(max_len)`` uint8 array ``[H, W, 3]``; a
    character the font lacks is drawn as the font draws missing glyphs."""
    height, width, _ = frame_shape(max_len)
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    font = _font()
    for i, char in enumerate(text):
        row, column = divmod(i, LINE_CHARS)
        xy = (MARGIN + column * CELL[0], MARGIN + row * CELL[1])
        draw.text(xy, char, fill="black", font=font)
    return np.asarray(image, dtype=np.uint8)


@functools.cache
def _font() -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=CELL[1] - 3)


def _round_up(pixels: int) -> int:
    return -(-pixels // SIDE) * SIDE
