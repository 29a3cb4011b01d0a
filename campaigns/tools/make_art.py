#!/usr/bin/env python3
"""Draw the art of the built-in campaign ``long_ebb``, and write its keyword sidecars.

The images are procedural: shapes and gradients drawn with Pillow from fixed
seeds, so running this again gives the same pictures. No image model is used.
Each image gets a ``<image>.keywords.txt`` sidecar
whose frontmatter says how it was made (``generated``/``provenance``; see
docs/campaigns.md, "Provenance") and whose lines are its keywords; the keywords match how
the campaign's prose describes the same thing, so the narrator's words and the
picture agree.

    python campaigns/tools/make_art.py [CAMPAIGN_DIR]   # default: campaigns/long_ebb

Images are quantized to a small palette and kept under 30 KB each.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from PIL import Image, ImageDraw, ImageFilter, ImageOps

VERSION = "1.0.0"
# A fixed time, not "now": regenerating must not change the sidecars.
GENERATED_AT = "2026-11-22T22:00:00Z"
SOURCE = "procedural: campaigns/tools/make_art.py (Pillow shapes and gradients; no image model)"
MAX_BYTES = 30_000
COLOURS = 48

RGB = tuple[int, int, int]


def vertical(size: tuple[int, int], top: RGB, bottom: RGB, mid: RGB | None = None) -> Image.Image:
    """A top-to-bottom gradient (through ``mid`` halfway, if given)."""
    ramp = Image.linear_gradient("L").resize(size)
    if mid is None:
        return ImageOps.colorize(ramp, top, bottom)
    return ImageOps.colorize(ramp, top, bottom, mid)


def glow(base: Image.Image, centre: tuple[int, int], radius: int, colour: RGB,
         strength: float = 1.0) -> Image.Image:
    """``base`` lit by a soft round light of ``colour`` at ``centre``."""
    mask = Image.radial_gradient("L").resize((radius * 2, radius * 2))
    mask = ImageOps.invert(mask).point(lambda v: int(min(255, v * strength)))
    full = Image.new("L", base.size, 0)
    full.paste(mask, (centre[0] - radius, centre[1] - radius))
    return Image.composite(Image.new("RGB", base.size, colour), base, full)


# -- the pictures -----------------------------------------------------------------------------

def undercourt(rng: random.Random) -> Image.Image:
    """The drowned town at low water, at dusk: mud, channels, roofless houses, lit windows."""
    w, h, horizon = 320, 200, 92
    img = vertical((w, horizon), (46, 52, 66), (214, 170, 120), (120, 110, 118))
    mud = vertical((w, h - horizon), (120, 112, 98), (58, 54, 50))
    canvas = Image.new("RGB", (w, h))
    canvas.paste(img, (0, 0))
    canvas.paste(mud, (0, horizon))
    d = ImageDraw.Draw(canvas)
    d.line([(0, horizon), (w, horizon)], fill=(222, 220, 205), width=2)  # the far-off sea
    for i in range(4):  # channels winding toward the viewer
        x = rng.randint(20, w - 20)
        points = []
        for y in range(horizon + 4, h + 10, 8):
            x += rng.randint(-9, 9)
            points.append((x, y))
        d.line(points, fill=(176, 170, 160), width=1 + i % 2 + (y - horizon) // 60)
    roofs = (44, 40, 42)
    x = 18
    while x < w - 30:  # roofless houses and broken gables along the horizon
        bw, bh = rng.randint(14, 28), rng.randint(12, 30)
        top = horizon + 8 - bh
        d.rectangle([x, top, x + bw, horizon + 10], fill=roofs)
        if rng.random() < 0.6:  # a broken gable, its roof long gone
            d.polygon([(x, top), (x + bw // 3, top - rng.randint(4, 10)),
                       (x + bw // 2, top - rng.randint(1, 4)), (x + bw, top)], fill=roofs)
        for _ in range(rng.randint(0, 2)):
            wx = x + rng.randint(3, max(3, bw - 6))
            wy = top + rng.randint(4, max(4, bh - 6))
            d.rectangle([wx, wy, wx + 3, wy + 4], fill=(150, 230, 160))
        x += bw + rng.randint(4, 12)
    # the Guildhall: a wide hall with tall green windows, and the bell frame beside it
    gx, gy = 180, horizon - 30
    d.rectangle([gx, gy, gx + 70, horizon + 12], fill=(36, 34, 36))
    d.polygon([(gx - 4, gy), (gx + 35, gy - 18), (gx + 74, gy)], fill=(36, 34, 36))
    for i in range(5):
        d.rectangle([gx + 6 + i * 13, gy + 8, gx + 12 + i * 13, gy + 26], fill=(120, 220, 150))
    canvas = glow(canvas, (gx + 35, gy + 16), 46, (90, 170, 120), 0.35)
    d = ImageDraw.Draw(canvas)
    for _ in range(6):  # gulls over the new ground
        bx, by = rng.randint(10, w - 10), rng.randint(10, horizon - 30)
        d.line([(bx - 4, by - 2), (bx, by), (bx + 4, by - 2)], fill=(235, 232, 225), width=1)
    return canvas


def odile(rng: random.Random) -> Image.Image:
    """Odile Venn against kiln light: green goggles on her brow, a soot-dark apron."""
    w, h = 192, 256
    img = vertical((w, h), (40, 22, 16), (18, 12, 10))
    img = glow(img, (w // 2, h - 40), 150, (232, 140, 52), 0.9)  # the kiln behind her
    d = ImageDraw.Draw(img)
    skin, hair, apron = (150, 104, 80), (52, 34, 26), (30, 26, 24)
    d.ellipse([26, 178, 166, 330], fill=(70, 44, 34))           # shoulders
    d.polygon([(62, 196), (130, 196), (146, 256), (46, 256)], fill=apron)  # the apron
    d.rectangle([86, 150, 106, 186], fill=skin)                   # neck
    d.ellipse([58, 58, 134, 128], fill=hair)                      # hair, tied back
    d.ellipse([64, 70, 128, 164], fill=skin)                      # face
    d.chord([60, 56, 132, 120], 180, 360, fill=hair)
    for cx in (80, 112):                                          # goggles pushed up
        d.ellipse([cx - 14, 62, cx + 14, 90], fill=(40, 40, 40))
        d.ellipse([cx - 10, 66, cx + 10, 86], fill=(110, 210, 140))
    d.line([(66, 76), (126, 76)], fill=(40, 40, 40), width=3)
    for _ in range(8):                                            # burn scars on the hands
        sx, sy = rng.randint(60, 130), rng.randint(226, 250)
        d.point((sx, sy), fill=(186, 120, 100))
    return img.filter(ImageFilter.SMOOTH)


def tamsin(rng: random.Random) -> Image.Image:
    """Tamsin Cask before the tide bell: cropped iron-grey hair, a black wool shawl."""
    w, h = 192, 256
    img = vertical((w, h), (150, 162, 172), (70, 80, 92))
    d = ImageDraw.Draw(img)
    frame = (54, 50, 46)
    d.rectangle([20, 20, 28, 170], fill=frame)                    # the open bell frame
    d.rectangle([164, 20, 172, 170], fill=frame)
    d.rectangle([20, 20, 172, 30], fill=frame)
    d.chord([60, 30, 132, 110], 180, 360, fill=(120, 92, 52))     # the bell
    d.rectangle([60, 70, 132, 84], fill=(120, 92, 52))
    d.ellipse([90, 84, 102, 96], fill=(96, 72, 40))
    d.polygon([(40, 256), (66, 186), (126, 186), (152, 256)], fill=(22, 22, 26))  # the shawl
    d.ellipse([70, 110, 122, 176], fill=(178, 150, 132))          # face
    d.pieslice([66, 100, 126, 150], 180, 360, fill=(128, 130, 132))  # cropped grey hair
    for i in range(12):                                           # rope on the frame
        y = 34 + i * 11 + rng.randint(-1, 1)
        d.line([(168, y), (176, y + 6)], fill=(160, 140, 100), width=2)
    return img.filter(ImageFilter.SMOOTH)


def lantern(rng: random.Random) -> Image.Image:
    """A tide lantern: an iron frame and hood around green saltglass, lit."""
    w = h = 128
    img = vertical((w, h), (26, 30, 36), (14, 16, 20))
    img = glow(img, (64, 72), 60, (90, 200, 130), 0.8)
    d = ImageDraw.Draw(img)
    iron = (30, 30, 32)
    d.arc([48, 4, 80, 30], 180, 360, fill=iron, width=4)           # handle
    d.polygon([(38, 34), (64, 18), (90, 34)], fill=iron)           # hood
    d.rectangle([42, 34, 86, 108], fill=(120, 220, 150))           # saltglass
    d.ellipse([54, 56, 74, 90], fill=(236, 250, 200))              # the flame
    for x in (42, 64, 86):                                         # frame bars
        d.line([(x, 34), (x, 108)], fill=iron, width=3)
    d.rectangle([36, 106, 92, 116], fill=iron)                     # base
    for _ in range(10):                                            # salt crust
        x, y = rng.randint(40, 88), rng.randint(100, 114)
        d.point((x, y), fill=(200, 200, 190))
    return img


# -- what to write ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Art:
    path: str                           # relative to the campaign folder
    seed: int
    draw: Callable[[random.Random], Image.Image]
    alt_text: str
    keywords: tuple[str, ...]


ART = (
    Art("art/locations/undercourt_at_low_water.png", 1907, undercourt,
        "The drowned town at low water at dusk: mudflats and channels, roofless houses, "
        "and the Guildhall's green windows lit from within.",
        ("undercourt", "drowned_town", "low_tide", "mudflats", "channels", "roofless_houses",
         "guildhall", "green_windows", "dusk", "gulls")),
    Art("art/characters/odile_venn.png", 4401, odile,
        "Odile Venn, a lampwright in her forties, green saltglass goggles pushed up on her "
        "forehead, a soot-dark apron, lit from behind by a kiln.",
        ("odile_venn", "lampwright", "guildmistress", "green_saltglass_goggles",
         "soot_dark_apron", "burn_scarred_hands", "kiln_light")),
    Art("art/characters/tamsin_cask.png", 6161, tamsin,
        "Tamsin Cask, an older woman with cropped iron-grey hair and a black wool shawl, "
        "standing before the tide bell in its open frame.",
        ("tamsin_cask", "bellkeeper", "iron_grey_hair", "cropped_hair", "black_shawl",
         "tide_bell", "bell_frame")),
    Art("art/items/tide_lantern.png", 2024, lantern,
        "A tide lantern: a hooded iron frame around green saltglass, its flame lit.",
        ("tide_lantern", "lantern", "saltglass", "green_glow", "iron_frame", "hood")),
)


def sidecar(art: Art) -> str:
    return "\n".join([
        "---",
        "generated: true",
        f"alt_text: {json.dumps(art.alt_text)}",
        "provenance:",
        f"  source_model: {json.dumps(SOURCE)}",
        f"  generated_at: {GENERATED_AT}",
        f"  seed_data: {json.dumps(f'seed {art.seed}, {art.draw.__name__}(): {art.draw.__doc__.strip()}')}",
        f"  version: {VERSION}",
        "---",
        "# keywords, one a line (docs/campaigns.md, \"Assets\")",
        *art.keywords,
        "",
    ])


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1] / "long_ebb"
    for art in ART:
        out = root / art.path
        out.parent.mkdir(parents=True, exist_ok=True)
        image = art.draw(random.Random(art.seed)).convert("RGB")
        image = image.quantize(COLOURS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
        image.save(out, "PNG", optimize=True)
        size = out.stat().st_size
        if size > MAX_BYTES:
            raise SystemExit(f"{out}: {size} bytes, over the {MAX_BYTES} byte budget")
        Path(f"{out}.keywords.txt").write_text(sidecar(art), "utf-8")
        print(f"{art.path}: {image.width}x{image.height}, {size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
