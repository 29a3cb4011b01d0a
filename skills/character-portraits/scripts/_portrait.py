"""What generate-portrait, lookup-portrait and update-portrait share.

Not a script (the leading underscore keeps discovery from offering it).

- **Settings** from ``references/config-schema.json`` (``kit.load_config``), with a
  script's own ``style`` / ``resolution`` input taking precedence.
- **Traits**: what a description says about a face (hair, eyes, skin, clothing,
  beard, scars, a hood, a crown, elven ears, age, build), read from its words;
  anything it does not say is drawn from the description's hash, so the same
  description always gives the same portrait.
- **Rendering**: a procedural portrait drawn with scanline spans (no per-pixel
  Python loop) in one of four styles, written as a PNG with the standard
  library (``zlib`` + ``struct``); no imaging library is needed.
- **The cache**: image files named by description hash, style and size in the
  skill's private storage folder (``data/portraits`` unless ``storageLocation``
  says otherwise), and one ``character_portrait`` record per character in the
  daemon's store (bound to the playthrough by the invocation's token), with a copy
  in the skill's own shared records (the store's ``skill:character-portraits``
  scope, ``shared=True``), which every playthrough searches after its own. The
  store embeds each record's description, so a paraphrase finds the portrait.
- **Degradation**: a portrait that cannot be made (unwritable storage, the
  generation timeout) becomes the shipped placeholder silhouette
  (``assets/silhouette.png``), never nothing. Under the daemon a skill may write only
  its data folder (its working directory) and its TMPDIR: a ``storageLocation``
  outside the data folder fails so, with a reason that names the setting.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
import signal
import struct
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

sys.dont_write_bytecode = True  # no __pycache__ inside the skill folder

from narratoria import skillkit as kit  # noqa: E402

DATA_TYPE = "character_portrait"
STYLES = ("realistic", "stylized", "anime", "pixel")
RESOLUTIONS = (256, 512, 1024)
PROVIDERS = ("local", "hosted")
DEFAULT_STYLE = "stylized"
DEFAULT_RESOLUTION = 256
DEFAULT_TIMEOUT_S = 15
# all-MiniLM-L6-v2 scores a paraphrase of a character description 0.6-0.85 and two
# different characters' descriptions up to ~0.47 (both "a man with a grey beard"...).
DEFAULT_THRESHOLD = 0.55
MAX_ID = 200
MAX_DESCRIPTION = 2000
MEDIA_TYPE = "image/png"
SKILL_ROOT = Path(__file__).resolve().parent.parent
SILHOUETTE = SKILL_ROOT / "assets" / "silhouette.png"
SILHOUETTE_SIZE = 256
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
STORE_FAILURES = {"store_unavailable", "store_forbidden", "store_rejected", "store_not_found",
                  "store_error"}


# -- input ---------------------------------------------------------------------------------

def choice(value: Any, field_name: str, options: tuple[str, ...]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value.strip().lower() not in options:
        raise kit.invalid(field_name, f"expected one of {', '.join(options)}, got {kit.describe(value)}")
    return value.strip().lower()


def resolution(value: Any, field_name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value not in RESOLUTIONS:
        raise kit.invalid(field_name, f"expected one of {', '.join(map(str, RESOLUTIONS))}, "
                                      f"got {kit.describe(value)}")
    return value


def character_id(params: dict, *, required: bool) -> str | None:
    return kit.text(params.get("characterId"), "input.characterId", max_length=MAX_ID,
                    required=required)


def description(params: dict, *, required: bool) -> str | None:
    """The description with its whitespace collapsed: the text that is hashed and stored."""
    value = kit.text(params.get("description"), "input.description", max_length=MAX_DESCRIPTION,
                     required=required)
    return None if value is None else " ".join(value.split())


def description_hash(text: str) -> str:
    """The store's own hash of a portrait's description (sha256 of the UTF-8 text)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# -- settings --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Settings:
    provider: str
    style: str
    resolution: int
    timeout_s: float
    storage: Path
    threshold: float
    endpoint: str
    model: str
    api_key: str


def data_dir() -> Path:
    given = os.environ.get("NARRATORIA_SKILL_DATA_DIR")
    return Path(given) if given else SKILL_ROOT / "data"


def _storage(value: Any) -> Path:
    if not isinstance(value, str):
        raise kit.invalid("storageLocation", f"expected a path, got {kit.describe(value)}")
    if not value.strip():
        return data_dir() / "portraits"
    path = Path(os.path.expanduser(value.strip()))
    return path if path.is_absolute() else data_dir() / path


def outside_data_dir(folder: Path) -> bool:
    """Whether ``folder`` lies outside the skill's data folder: the daemon's sandbox lets
    a skill write nowhere else (only a script run alone may)."""
    inside = Path(os.path.realpath(data_dir()))
    real = Path(os.path.realpath(folder))
    return real != inside and inside not in real.parents


def _unwritable(conf: "Settings", why: str) -> "GenerationFailed":
    """The failure to write into the storage folder, naming the setting to change when
    the folder is one the sandbox keeps a skill out of."""
    if outside_data_dir(conf.storage):
        why += (f" (the storageLocation setting names a folder outside the skill's data "
                f"folder {data_dir()}, and under the daemon a skill may write only there: "
                "set it to a folder inside it, or empty)")
    return GenerationFailed(why)


def _string(name: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if not isinstance(value, str):
            raise kit.invalid(name, f"expected a string, got {kit.describe(value)}")
        return value.strip()
    return check


def settings(out: kit.Emitter, params: dict) -> Settings:
    """The player's settings, each checked (a bad one warns and its default applies), with
    the input's ``style`` / ``resolution`` over them (a bad one is an input error)."""
    config = kit.load_config(out)
    style = choice(params.get("style"), "input.style", STYLES) or kit.config_value(
        out, config, "stylePreset", lambda v: choice(v, "stylePreset", STYLES), DEFAULT_STYLE)
    size = resolution(params.get("resolution"), "input.resolution") or kit.config_value(
        out, config, "resolution", lambda v: resolution(v, "resolution"), DEFAULT_RESOLUTION)
    return Settings(
        provider=kit.config_value(out, config, "imageProvider",
                                  lambda v: choice(v, "imageProvider", PROVIDERS), "local"),
        style=style, resolution=size,
        timeout_s=float(kit.config_value(out, config, "timeout",
                                         lambda v: kit.integer(v, "timeout", low=1, high=120),
                                         DEFAULT_TIMEOUT_S)),
        storage=kit.config_value(out, config, "storageLocation", _storage, data_dir() / "portraits"),
        threshold=kit.config_value(out, config, "similarityThreshold",
                                   lambda v: kit.number(v, "similarityThreshold", low=0.01, high=1.0),
                                   DEFAULT_THRESHOLD),
        endpoint=kit.config_value(out, config, "hostedEndpoint", _string("hostedEndpoint"), ""),
        model=kit.config_value(out, config, "hostedModel", _string("hostedModel"), ""),
        api_key=kit.config_value(out, config, "apiKey", _string("apiKey"), ""),
    )


# -- traits: what the description says about the face ----------------------------------------

RGB = tuple[int, int, int]

COLOURS: dict[str, RGB] = {
    "black": (30, 26, 28), "raven": (24, 22, 30), "jet": (20, 20, 24), "ebony": (38, 28, 24),
    "dark": (52, 38, 30), "brown": (98, 62, 36), "chestnut": (118, 60, 30),
    "auburn": (142, 58, 34), "red": (172, 44, 32), "ginger": (196, 96, 42),
    "copper": (184, 100, 52), "fiery": (214, 70, 30), "blonde": (226, 192, 112),
    "blond": (226, 192, 112), "golden": (222, 176, 64), "gold": (214, 170, 56),
    "flaxen": (232, 212, 150), "fair": (232, 204, 140), "silver": (202, 206, 218),
    "grey": (148, 148, 152), "gray": (148, 148, 152), "white": (236, 236, 230),
    "snowy": (244, 244, 246), "ashen": (178, 174, 170), "blue": (52, 92, 192),
    "azure": (60, 130, 220), "navy": (30, 40, 96), "green": (48, 136, 70),
    "emerald": (28, 150, 92), "jade": (60, 160, 120), "olive": (110, 112, 52),
    "purple": (110, 56, 150), "violet": (132, 80, 188), "indigo": (70, 50, 140),
    "crimson": (152, 20, 42), "scarlet": (204, 32, 32), "yellow": (224, 204, 60),
    "orange": (222, 122, 40), "pink": (232, 134, 172), "teal": (36, 136, 138),
    "amber": (204, 142, 36), "hazel": (142, 108, 56), "bronze": (164, 112, 58),
    "tan": (196, 156, 108), "ivory": (240, 232, 208), "maroon": (112, 30, 40),
    "steel": (150, 158, 170), "rust": (160, 72, 38), "leather": (112, 74, 44),
    "fur": (132, 104, 74), "linen": (222, 212, 186), "wool": (170, 150, 120),
}
SKIN_TONES: dict[str, RGB] = {
    "pale": (242, 218, 200), "fair": (236, 204, 178), "light": (228, 190, 160),
    "olive": (200, 160, 118), "tanned": (196, 146, 104), "brown": (150, 100, 66),
    "dark": (108, 70, 46), "ebony": (80, 52, 36), "green": (112, 150, 82),
    "grey": (168, 172, 176), "ashen": (200, 204, 210), "blue": (104, 140, 200),
    "red": (184, 74, 64), "golden": (214, 170, 112),
}
NATURAL_HAIR = ("black", "brown", "chestnut", "auburn", "blonde", "red")
NATURAL_EYES = ("brown", "blue", "green", "grey", "hazel")
NATURAL_SKIN = ("pale", "fair", "light", "olive", "tanned", "brown", "dark")
CLOTHES = ("brown", "green", "blue", "crimson", "grey", "navy", "olive", "maroon", "teal", "purple")

HAIR_WORDS = {"hair", "haired", "locks", "braid", "braids", "braided", "curls", "mane",
              "ponytail", "tresses"}
BEARD_WORDS = {"beard", "bearded", "moustache", "mustache", "stubble", "whiskers"}
EYE_WORDS = {"eye", "eyes", "eyed", "gaze"}
SKIN_WORDS = {"skin", "skinned", "complexion"}
CLOTHING_WORDS = {"cloak", "cape", "robe", "robes", "coat", "tunic", "shirt", "dress", "gown",
                  "jacket", "vest", "doublet", "uniform", "armour", "armor", "mail", "plate",
                  "tabard", "hood", "hooded", "scarf", "shawl", "apron", "leathers", "jerkin",
                  "surcoat", "habit", "cassock", "kimono", "sari", "mantle", "garb", "clothes",
                  "attire", "cowl", "overcoat", "waistcoat", "blouse"}
FEATURE_OF: dict[str, str] = {
    **{w: "hair" for w in HAIR_WORDS}, **{w: "beard" for w in BEARD_WORDS},
    **{w: "eyes" for w in EYE_WORDS}, **{w: "skin" for w in SKIN_WORDS},
    **{w: "clothing" for w in CLOTHING_WORDS},
}
HAIR_ONLY = {"blonde": "blonde", "blond": "blonde", "brunette": "brown", "redhead": "red",
             "redheaded": "red", "ginger": "ginger", "flaxen": "flaxen"}
PALE_WORDS = {"pale", "pallid", "wan", "porcelain"}
TANNED_WORDS = {"tanned", "sunburnt", "sunburned", "weathered", "swarthy", "bronzed"}
RACE_SKIN = {"orc": "green", "orcish": "green", "goblin": "green", "troll": "green",
             "undead": "ashen", "vampire": "ashen", "vampiric": "ashen", "ghost": "ashen",
             "ghostly": "ashen", "ghoul": "ashen", "lich": "ashen", "corpse": "ashen",
             "tiefling": "red", "demon": "red", "demonic": "red", "genasi": "blue"}
OLD_WORDS = {"old", "elderly", "aged", "ancient", "grizzled", "venerable", "greying", "graying",
             "wrinkled", "crone", "grandfather", "grandmother", "elder", "hoary", "wizened"}
YOUNG_WORDS = {"young", "youthful", "boy", "girl", "child", "teenage", "teenager", "youth", "lad",
               "lass", "kid"}
BROAD_WORDS = {"broad", "burly", "stout", "muscular", "brawny", "hulking", "massive", "big",
               "heavy", "strong", "barrel", "stocky", "thickset", "bulky", "giant"}
SLIGHT_WORDS = {"thin", "slender", "gaunt", "wiry", "slight", "skinny", "lean", "frail",
                "willowy", "lanky", "petite", "delicate"}
ROUND_WORDS = {"fat", "plump", "portly", "round", "rotund", "chubby", "jowly"}
BALD_WORDS = {"bald", "shaven", "shaved", "hairless", "tonsured"}
LONG_WORDS = {"long", "flowing", "braid", "braids", "braided", "ponytail", "mane", "tresses"}
SHORT_WORDS = {"short", "cropped", "close"}
CURLY_WORDS = {"curly", "curls", "wild", "unkempt", "shaggy", "tousled", "wavy", "frizzy"}
FEMININE = {"woman", "lady", "queen", "princess", "she", "her", "girl", "mother", "witch",
            "priestess", "sorceress", "duchess", "empress", "maiden", "daughter", "sister",
            "wife", "widow", "crone", "matron", "baroness", "countess", "heroine", "lass"}
MASCULINE = {"man", "lord", "king", "prince", "he", "his", "boy", "father", "wizard", "priest",
             "sorcerer", "duke", "emperor", "son", "brother", "husband", "monk", "baron",
             "count", "knight", "lad", "sir"}
ARMOUR_WORDS = {"armour", "armor", "armoured", "armored", "plate", "mail", "chainmail",
                "knight", "paladin", "breastplate", "helm", "helmet"}
CROWN_WORDS = {"crown", "crowned", "circlet", "tiara", "diadem", "king", "queen", "prince",
               "princess", "monarch", "emperor", "empress"}
HOOD_WORDS = {"hood", "hooded", "cowl", "cowled"}
CASTER_WORDS = {"wizard", "witch", "mage", "sorcerer", "sorceress", "warlock", "magician"}
ELF_WORDS = {"elf", "elven", "elvish", "elves", "fae", "faerie", "fairy", "eladrin", "drow"}
SCAR_WORDS = {"scar", "scarred", "scars", "scarring"}
PATCH_WORDS = {"eyepatch", "patch"}
GLASSES_WORDS = {"glasses", "spectacles", "monocle", "bespectacled"}
FRECKLE_WORDS = {"freckles", "freckled"}
TATTOO_WORDS = {"tattoo", "tattoos", "tattooed", "warpaint"}
# Words between a colour and its noun ("silver, braided hair", "green woollen cloak").
LOOKAHEAD = 4


@dataclass
class Traits:
    skin: str = ""
    hair: str = ""  # "" when bald
    hair_style: str = "short"  # short | long | curly | bald
    eyes: str = ""
    clothing: str = ""
    beard: str = ""  # a colour, or "" for none
    age: str = "adult"  # young | adult | old
    build: str = "average"  # slight | average | broad | round
    features: list[str] = field(default_factory=list)  # scar, eyepatch, hood, crown, ...
    colours: dict[str, RGB] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"skin": self.skin, "hair": self.hair or "none",
                               "hairStyle": self.hair_style, "eyes": self.eyes,
                               "clothing": self.clothing, "age": self.age, "build": self.build,
                               "features": sorted(self.features)}
        if self.beard:
            doc["beard"] = self.beard
        doc["colours"] = {k: "#%02x%02x%02x" % v for k, v in sorted(self.colours.items())}
        return doc


class Dice:
    """Deterministic choices from a description's hash (sha256 in counter mode): the same
    on every machine and Python version, unlike ``random``."""

    def __init__(self, seed: str) -> None:
        self.seed, self.counter, self.pool = seed.encode("utf-8"), 0, b""

    def _bytes(self, n: int) -> bytes:
        while len(self.pool) < n:
            self.pool += hashlib.sha256(self.seed + self.counter.to_bytes(8, "big")).digest()
            self.counter += 1
        taken, self.pool = self.pool[:n], self.pool[n:]
        return taken

    def unit(self) -> float:
        return int.from_bytes(self._bytes(4), "big") / 2 ** 32

    def pick(self, options: tuple | list) -> Any:
        return options[int(self.unit() * len(options)) % len(options)]

    def between(self, low: float, high: float) -> float:
        return low + (high - low) * self.unit()


def read_traits(text: str, dice: Dice) -> Traits:
    """The face a description describes; what it leaves open comes from ``dice``."""
    words = re.findall(r"[a-z]+", text.lower())
    vocabulary = set(words)
    found: dict[str, str] = {}  # feature -> colour word
    for i, word in enumerate(words):
        if word not in COLOURS and word not in SKIN_TONES and word not in PALE_WORDS | TANNED_WORDS:
            continue
        for noun in words[i + 1:i + 1 + LOOKAHEAD]:
            feature = FEATURE_OF.get(noun)
            if feature is not None:
                found.setdefault(feature, word)
                break
            if noun in ("and", "but", "with", "of", "in", "wearing", "who", "while"):
                break
    # "hair of gold", "eyes like jade", "a cloak the colour of rust".
    for i, word in enumerate(words):
        feature = FEATURE_OF.get(word)
        if feature is None or feature in found or words[i + 1:i + 2] not in (
                ["of"], ["as"], ["like"], ["the"]):
            continue
        colour = next((w for w in words[i + 1:i + 5] if w in COLOURS), None)
        if colour is not None:
            found[feature] = colour
    traits = Traits()

    # Skin: a colour named for it, a word for it, a people known for it, else the dice.
    skin = found.get("skin")
    if skin in PALE_WORDS:
        skin = "pale"
    elif skin in TANNED_WORDS:
        skin = "tanned"
    elif skin == "black":
        skin = "ebony"
    if skin not in SKIN_TONES:
        skin = None
    if skin is None:
        skin = next((RACE_SKIN[w] for w in words if w in RACE_SKIN), None)
    if skin is None and vocabulary & PALE_WORDS:
        skin = "pale"
    if skin is None and vocabulary & TANNED_WORDS:
        skin = "tanned"
    traits.skin = skin or dice.pick(NATURAL_SKIN)

    # Age and build.
    if vocabulary & OLD_WORDS:
        traits.age = "old"
    elif vocabulary & YOUNG_WORDS:
        traits.age = "young"
    if vocabulary & ROUND_WORDS:
        traits.build = "round"
    elif vocabulary & BROAD_WORDS:
        traits.build = "broad"
    elif vocabulary & SLIGHT_WORDS:
        traits.build = "slight"

    # Hair: colour and cut.
    hair = found.get("hair") or next((HAIR_ONLY[w] for w in words if w in HAIR_ONLY), None)
    if hair in ("dark",):
        hair = "black"
    if hair not in COLOURS:
        hair = None
    feminine = len(vocabulary & FEMININE) > len(vocabulary & MASCULINE)
    if vocabulary & BALD_WORDS:
        traits.hair_style = "bald"
    elif _near(words, LONG_WORDS, HAIR_WORDS) or vocabulary & {"braid", "braids", "braided",
                                                               "ponytail", "mane", "tresses"}:
        traits.hair_style = "long"
    elif _near(words, CURLY_WORDS, HAIR_WORDS) or "curls" in vocabulary:
        traits.hair_style = "curly"
    elif _near(words, SHORT_WORDS, HAIR_WORDS):
        traits.hair_style = "short"
    else:
        traits.hair_style = "long" if feminine else dice.pick(("short", "short", "curly", "long"))
    beard = found.get("beard")
    if hair is None and beard in COLOURS and beard not in ("leather", "fur", "linen", "wool"):
        hair = beard  # "a grey beard": grey hair too, unless the hair is named
    if traits.hair_style == "bald":
        traits.hair = ""
    else:
        traits.hair = hair or (dice.pick(("grey", "white", "silver")) if traits.age == "old"
                               else dice.pick(NATURAL_HAIR))

    # Beard: only when the description has one (or a dwarf, who always does).
    if vocabulary & BEARD_WORDS or "dwarf" in vocabulary or "dwarven" in vocabulary:
        traits.beard = beard if beard in COLOURS else (traits.hair or dice.pick(NATURAL_HAIR))

    eyes = found.get("eyes")
    traits.eyes = eyes if eyes in COLOURS and eyes not in ("dark",) else (
        "black" if eyes == "dark" else dice.pick(NATURAL_EYES))

    clothing = found.get("clothing")
    if clothing in COLOURS:
        traits.clothing = clothing
    elif vocabulary & ARMOUR_WORDS:
        traits.clothing = "steel"
    else:
        traits.clothing = dice.pick(CLOTHES)

    features = set()
    for words_of, name in ((SCAR_WORDS, "scar"), (PATCH_WORDS, "eyepatch"),
                           (GLASSES_WORDS, "glasses"), (FRECKLE_WORDS, "freckles"),
                           (TATTOO_WORDS, "tattoo"), (ELF_WORDS, "pointed-ears"),
                           (HOOD_WORDS, "hood"), (CROWN_WORDS, "crown"),
                           (ARMOUR_WORDS, "armour")):
        if vocabulary & words_of:
            features.add(name)
    if "one" in vocabulary and "eyed" in vocabulary:
        features.add("eyepatch")
    if "hat" in vocabulary:
        features.add("pointed-hat" if vocabulary & CASTER_WORDS else "hat")
    if "hood" in features and ("hat" in features or "pointed-hat" in features):
        features.discard("hood")
    if "crown" in features:
        features.discard("hat")
        features.discard("pointed-hat")
    if traits.age == "old":
        features.add("wrinkles")
    traits.features = sorted(features)

    # The colours used, as the image will hold them.
    traits.colours = {"skin": SKIN_TONES[traits.skin], "eyes": COLOURS[traits.eyes],
                      "clothing": COLOURS[traits.clothing]}
    if traits.hair:
        traits.colours["hair"] = COLOURS[traits.hair]
    if traits.beard:
        traits.colours["beard"] = COLOURS[traits.beard]
    return traits


def _near(words: list[str], adjectives: set[str], nouns: set[str]) -> bool:
    """An adjective of ``adjectives`` within three words before a noun of ``nouns``."""
    return any(w in adjectives and any(n in nouns for n in words[i + 1:i + 4])
               for i, w in enumerate(words))


# -- rendering ---------------------------------------------------------------------------------

def shade(colour: RGB, factor: float) -> RGB:
    return tuple(max(0, min(255, int(round(c * factor)))) for c in colour)  # type: ignore[return-value]


def mix(a: RGB, b: RGB, t: float) -> RGB:
    return tuple(int(round(x + (y - x) * t)) for x, y in zip(a, b))  # type: ignore[return-value]


def saturate(colour: RGB, amount: float) -> RGB:
    grey = sum(colour) / 3
    return tuple(max(0, min(255, int(round(grey + (c - grey) * amount))))  # type: ignore[return-value]
                 for c in colour)


class Canvas:
    """RGB rows, painted one horizontal span at a time (fast in pure Python)."""

    def __init__(self, size: int, style: str) -> None:
        self.size, self.style = size, style
        self.rows = [bytearray(size * 3) for _ in range(size)]
        self.shaded = style == "realistic"
        self.outline = {"stylized": 0.009, "anime": 0.007}.get(style, 0.0)

    def span(self, y: int, x0: float, x1: float, colour: RGB) -> None:
        a, b = max(0, int(round(x0))), min(self.size, int(round(x1)))
        if b > a and 0 <= y < self.size:
            self.rows[y][a * 3:b * 3] = bytes(colour) * (b - a)

    def _paint(self, y: int, x0: float, x1: float, colour: RGB, cx: float, half: float,
               vertical: float) -> None:
        """One span of a shape; the realistic style lights it from the upper left."""
        if not self.shaded:
            self.span(y, x0, x1, colour)
            return
        base = shade(colour, 1.08 - 0.22 * vertical)
        bands = 6
        width = (x1 - x0) / bands
        for i in range(bands):
            left = x0 + i * width
            middle = (left + width / 2 - cx) / max(half, 1e-6)  # -1 (left) .. 1 (right)
            self.span(y, left, left + width, shade(base, 1.06 - 0.16 * middle))

    def _rows(self, top: float, bottom: float) -> range:
        s = self.size
        return range(max(0, int(math.floor(top * s))), min(s, int(math.ceil(bottom * s))))

    def ellipse(self, cx: float, cy: float, rx: float, ry: float, colour: RGB, *,
                top: float = -1.0, bottom: float = 2.0, outline: bool = True) -> None:
        """A filled ellipse (normalised 0-1 coordinates), clipped to rows ``top``..``bottom``."""
        if outline and self.outline:
            self._ellipse(cx, cy, rx + self.outline, ry + self.outline, shade(colour, 0.42),
                          top - self.outline, bottom + self.outline)
        self._ellipse(cx, cy, rx, ry, colour, top, bottom)

    def _ellipse(self, cx: float, cy: float, rx: float, ry: float, colour: RGB, top: float,
                 bottom: float) -> None:
        s = self.size
        for y in self._rows(max(cy - ry, top), min(cy + ry, bottom)):
            v = (y + 0.5) / s
            d = (v - cy) / ry
            if abs(d) >= 1.0:
                continue
            half = rx * math.sqrt(1.0 - d * d)
            self._paint(y, (cx - half) * s, (cx + half) * s, colour, cx * s, rx * s,
                        (d + 1.0) / 2.0)

    def polygon(self, points: list[tuple[float, float]], colour: RGB) -> None:
        """A filled polygon (even-odd), normalised coordinates."""
        s = self.size
        ys = [p[1] for p in points]
        top, bottom = min(ys), max(ys)
        edges = list(zip(points, points[1:] + points[:1]))
        for y in self._rows(top, bottom):
            v = (y + 0.5) / s
            xs = sorted(x0 + (v - y0) * (x1 - x0) / (y1 - y0)
                        for (x0, y0), (x1, y1) in edges
                        if (y0 <= v < y1) or (y1 <= v < y0))
            vertical = (v - top) / max(bottom - top, 1e-6)
            for a, b in zip(xs[0::2], xs[1::2]):
                self._paint(y, a * s, b * s, colour, (a + b) / 2 * s, (b - a) / 2 * s, vertical)

    def line(self, x0: float, y0: float, x1: float, y1: float, width: float, colour: RGB) -> None:
        dx, dy = x1 - x0, y1 - y0
        length = math.hypot(dx, dy) or 1e-6
        nx, ny = -dy / length * width / 2, dx / length * width / 2
        self.polygon([(x0 + nx, y0 + ny), (x1 + nx, y1 + ny), (x1 - nx, y1 - ny),
                      (x0 - nx, y0 - ny)], colour)

    def gradient(self, top: RGB, bottom: RGB) -> None:
        for y in range(self.size):
            self.span(y, 0, self.size, mix(top, bottom, y / max(self.size - 1, 1)))


def render(traits: Traits, style: str, size: int, dice: Dice) -> list[bytes]:
    """The portrait's RGB rows, ``size`` × ``size``."""
    if style == "pixel":
        small = max(32, size // 8)
        rows = _draw(traits, style, small, dice)
        return upscale(rows, small, size // small)
    return _draw(traits, style, size, dice)


def upscale(rows: list[bytes], size: int, factor: int) -> list[bytes]:
    out: list[bytes] = []
    for row in rows:
        wide = b"".join(row[i:i + 3] * factor for i in range(0, size * 3, 3))
        out.extend([wide] * factor)
    return out


def _palette(colour: RGB, style: str) -> RGB:
    if style == "anime":
        return saturate(shade(colour, 1.05), 1.25)
    if style == "pixel":
        return tuple(min(255, (c // 16) * 16 + 8) for c in colour)  # type: ignore[return-value]
    return colour


def _draw(traits: Traits, style: str, size: int, dice: Dice) -> list[bytes]:
    c = Canvas(size, style)
    p = lambda name: _palette(traits.colours[name], style)  # noqa: E731
    skin, eyes, clothing = p("skin"), p("eyes"), p("clothing")
    hair = p("hair") if traits.hair else None
    beard = p("beard") if traits.beard else None
    anime = style == "anime"

    # Background: a gradient in a hue of the description's own, and a halo.
    hue = (dice.between(40, 200), dice.between(40, 200), dice.between(40, 200))
    back = _palette(tuple(int(h) for h in hue), style)  # type: ignore[arg-type]
    c.gradient(shade(back, 1.25), shade(back, 0.55))
    if style in ("stylized", "anime"):
        c.ellipse(0.5, 0.44, 0.40, 0.40, shade(back, 1.45), outline=False)

    wide = {"broad": 1.2, "round": 1.12, "slight": 0.86}.get(traits.build, 1.0)
    face_w = {"round": 1.12, "slight": 0.92}.get(traits.build, 1.0) * dice.between(0.94, 1.04)
    head_cx, head_cy = 0.5, 0.44
    head_rx, head_ry = 0.17 * face_w, 0.225
    lean = dice.between(-0.012, 0.012)

    # Behind the head: a hood's back, long hair.
    if "hood" in traits.features:
        c.ellipse(head_cx, head_cy + 0.02, head_rx + 0.09, head_ry + 0.08, shade(clothing, 0.8))
        c.ellipse(head_cx, head_cy + 0.04, head_rx + 0.035, head_ry + 0.03, shade(clothing, 0.35),
                  outline=False)
    elif hair and traits.hair_style == "long":
        c.ellipse(head_cx, head_cy + 0.12, head_rx + 0.06, head_ry + 0.16, hair,
                  top=head_cy - 0.05)

    # Torso and neck.
    c.ellipse(0.5, 1.06, 0.40 * wide, 0.30, clothing)
    if "armour" in traits.features:
        for side in (-1, 1):
            c.ellipse(0.5 + side * 0.27 * wide, 0.84, 0.11 * wide, 0.07, shade(clothing, 1.15))
    c.polygon([(0.455, 0.58), (0.545, 0.58), (0.555, 0.80), (0.445, 0.80)], shade(skin, 0.82))
    if "hood" not in traits.features and "armour" not in traits.features:
        c.polygon([(0.43, 0.76), (0.57, 0.76), (0.5, 0.86)], shade(skin, 0.82))  # the neckline

    # Ears.
    for side in (-1, 1):
        ear_x = head_cx + side * head_rx * 0.98
        if "pointed-ears" in traits.features:
            c.polygon([(ear_x - side * 0.005, 0.41), (ear_x + side * 0.075, 0.34),
                       (ear_x + side * 0.018, 0.49)], shade(skin, 0.92))
        elif "hood" not in traits.features:
            c.ellipse(ear_x, 0.465, 0.028, 0.045, shade(skin, 0.92))

    # The head, and an anime chin.
    c.ellipse(head_cx, head_cy, head_rx, head_ry, skin)
    if anime:
        c.polygon([(head_cx - head_rx * 0.8, head_cy + 0.08), (head_cx + head_rx * 0.8, head_cy + 0.08),
                   (head_cx, head_cy + head_ry + 0.03)], skin)

    # Hair on top (a cap over the forehead), curls around it, a fringe from the dice.
    if hair and "hood" not in traits.features:
        cap_bottom = head_cy - 0.085 + dice.between(-0.015, 0.015)
        c.ellipse(head_cx + lean, head_cy - 0.03, head_rx + 0.025, head_ry + 0.01, hair,
                  bottom=cap_bottom)
        if traits.hair_style == "curly":
            for i in range(9):
                angle = math.pi * (1.05 + 0.9 * i / 8)
                c.ellipse(head_cx + math.cos(angle) * (head_rx + 0.02),
                          head_cy - 0.03 + math.sin(angle) * (head_ry - 0.02), 0.04, 0.04, hair)
        if traits.hair_style == "long":
            for side in (-1, 1):
                c.ellipse(head_cx + side * (head_rx + 0.018), head_cy + 0.02, 0.03, 0.13, hair,
                          top=head_cy - 0.12)
        fringe = int(dice.between(0, 3))
        if fringe == 1:  # a side parting
            c.polygon([(head_cx - head_rx, cap_bottom - 0.01), (head_cx + 0.03, cap_bottom - 0.01),
                       (head_cx - head_rx * 0.9, cap_bottom + 0.06)], hair)
        elif fringe == 2:  # bangs
            for i in range(4):
                x = head_cx - head_rx * 0.75 + i * head_rx * 0.5
                c.polygon([(x - 0.03, cap_bottom - 0.01), (x + 0.03, cap_bottom - 0.01),
                           (x, cap_bottom + 0.04)], hair)

    # A hood's front edge over the brow.
    if "hood" in traits.features:
        c.ellipse(head_cx, head_cy - 0.06, head_rx + 0.06, head_ry - 0.02, clothing,
                  bottom=head_cy - 0.105)

    # Eyes, brows, nose, mouth.
    eye_y = head_cy + 0.02
    eye_dx = head_rx * 0.45
    eye_rx, eye_ry = (0.034, 0.036) if anime else (0.03, 0.016)
    brow = shade(hair, 0.8) if hair else shade(skin, 0.6)
    if traits.age == "old":
        brow = mix(brow, (220, 220, 220), 0.6)
    for side in (-1, 1):
        x = head_cx + side * eye_dx
        if "eyepatch" in traits.features and side == 1:
            continue
        c.ellipse(x, eye_y, eye_rx, eye_ry, (246, 244, 240), outline=False)
        iris = 0.028 if anime else 0.0145
        c.ellipse(x, eye_y + (0.004 if anime else 0), iris * 0.9, iris, eyes, outline=False)
        c.ellipse(x, eye_y + (0.004 if anime else 0), iris * 0.45, iris * 0.5, (16, 14, 18),
                  outline=False)
        if anime:
            c.ellipse(x - 0.01, eye_y - 0.01, 0.008, 0.009, (255, 255, 255), outline=False)
        c.line(x - 0.035, eye_y - 0.035 - (0.015 if anime else 0) + dice.between(-0.004, 0.004),
               x + 0.035, eye_y - 0.038 - (0.015 if anime else 0), 0.011, brow)
    if "eyepatch" in traits.features:
        c.line(head_cx - head_rx, head_cy - 0.09, head_cx + head_rx, head_cy + 0.05, 0.009,
               (20, 18, 20))
        c.ellipse(head_cx + eye_dx, eye_y, 0.04, 0.03, (20, 18, 20), outline=False)
    if "glasses" in traits.features:
        for side in (-1, 1):
            x = head_cx + side * eye_dx
            c.ellipse(x, eye_y, 0.045, 0.035, (40, 36, 30), outline=False)
            c.ellipse(x, eye_y, 0.037, 0.027, mix(skin, (250, 250, 250), 0.5), outline=False)
            c.ellipse(x, eye_y, 0.014, 0.014, eyes, outline=False)
        c.line(head_cx - eye_dx + 0.045, eye_y, head_cx + eye_dx - 0.045, eye_y, 0.006, (40, 36, 30))
    nose = shade(skin, 0.8)
    if anime:
        c.line(head_cx, head_cy + 0.07, head_cx + 0.006, head_cy + 0.08, 0.006, nose)
    else:
        c.polygon([(head_cx, head_cy + 0.03), (head_cx + 0.022, head_cy + 0.1),
                   (head_cx - 0.018, head_cy + 0.1)], nose)
    if "freckles" in traits.features:
        for i in range(10):
            side = -1 if i % 2 else 1
            c.ellipse(head_cx + side * dice.between(0.03, 0.1), head_cy + dice.between(0.05, 0.1),
                      0.005, 0.005, shade(skin, 0.7), outline=False)
    if "wrinkles" in traits.features:
        for side in (-1, 1):
            c.line(head_cx + side * 0.03, head_cy + 0.11, head_cx + side * 0.06, head_cy + 0.15,
                   0.005, shade(skin, 0.72))
            c.line(head_cx + side * (eye_dx + 0.04), eye_y, head_cx + side * (eye_dx + 0.06),
                   eye_y + 0.015, 0.004, shade(skin, 0.72))
    if beard:
        c.ellipse(head_cx, head_cy + 0.1, head_rx + 0.01, head_ry * 0.75, beard,
                  top=head_cy + 0.09)
        c.ellipse(head_cx, head_cy + 0.135, 0.06, 0.015, beard, outline=False)  # moustache
    mouth = (150, 70, 70) if not beard else shade(beard, 0.5)
    smile = dice.between(-0.006, 0.008)
    c.line(head_cx - 0.038, head_cy + 0.15 - smile, head_cx, head_cy + 0.155, 0.009, mouth)
    c.line(head_cx, head_cy + 0.155, head_cx + 0.038, head_cy + 0.15 - smile, 0.009, mouth)
    if "scar" in traits.features:
        side = 1 if dice.unit() < 0.5 else -1
        c.line(head_cx + side * 0.04, head_cy - 0.04, head_cx + side * 0.12, head_cy + 0.1, 0.01,
               (170, 70, 70))
    if "tattoo" in traits.features:
        c.line(head_cx - 0.1, head_cy + 0.06, head_cx - 0.05, head_cy + 0.12, 0.008, (40, 60, 120))
        c.line(head_cx + 0.1, head_cy + 0.06, head_cx + 0.05, head_cy + 0.12, 0.008, (40, 60, 120))

    # Headwear.
    top = head_cy - head_ry
    if "crown" in traits.features:
        gold = _palette((214, 170, 56), style)
        c.polygon([(head_cx - 0.13, top + 0.06), (head_cx + 0.13, top + 0.06),
                   (head_cx + 0.13, top + 0.0), (head_cx + 0.085, top + 0.035),
                   (head_cx + 0.045, top - 0.04), (head_cx, top + 0.02),
                   (head_cx - 0.045, top - 0.04), (head_cx - 0.085, top + 0.035),
                   (head_cx - 0.13, top + 0.0)], gold)
        c.ellipse(head_cx, top + 0.045, 0.014, 0.012, (200, 30, 50), outline=False)
    elif "pointed-hat" in traits.features:
        c.polygon([(head_cx - 0.13, top + 0.07), (head_cx + 0.13, top + 0.07),
                   (head_cx + 0.06, top - 0.2)], shade(clothing, 0.9))
        c.ellipse(head_cx, top + 0.07, 0.25, 0.035, shade(clothing, 0.75))
    elif "hat" in traits.features:
        c.ellipse(head_cx, top + 0.06, 0.26, 0.04, shade(clothing, 0.6))
        c.ellipse(head_cx, top + 0.01, 0.14, 0.08, shade(clothing, 0.7), bottom=top + 0.06)
    return [bytes(row) for row in c.rows]


def silhouette_rows(size: int) -> list[bytes]:
    """The placeholder: a grey head-and-shoulders silhouette on a light ground."""
    c = Canvas(size, "stylized")
    c.outline = 0.0
    c.gradient((226, 226, 230), (196, 196, 204))
    figure = (120, 122, 132)
    c.ellipse(0.5, 1.06, 0.38, 0.30, figure)
    c.polygon([(0.455, 0.58), (0.545, 0.58), (0.555, 0.80), (0.445, 0.80)], figure)
    c.ellipse(0.5, 0.44, 0.17, 0.225, figure)
    return [bytes(row) for row in c.rows]


# -- PNG ----------------------------------------------------------------------------------------

def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(
        ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_bytes(width: int, height: int, rows: list[bytes]) -> bytes:
    """An 8-bit RGB PNG (filter 0 on every row): deterministic for the same rows."""
    if len(rows) != height or any(len(r) != width * 3 for r in rows):
        raise ValueError("rows do not match the image size")
    raw = b"".join(b"\x00" + row for row in rows)
    return (PNG_SIGNATURE
            + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + _chunk(b"tEXt", b"Software\x00Narratoria character-portraits")
            + _chunk(b"IDAT", zlib.compress(raw, 6))
            + _chunk(b"IEND", b""))


def png_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) of PNG bytes, or None when they are not a PNG."""
    if len(data) < 24 or not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", data[16:24])


def image_type(data: bytes) -> str | None:
    """The MIME type of image bytes a hosted provider sent, by their magic number."""
    if data.startswith(PNG_SIGNATURE):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def write_atomic(path: Path, data: bytes) -> None:
    """Readers see the old file or the whole new one, never part of one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# -- generation -----------------------------------------------------------------------------------

class GenerationFailed(Exception):
    """No portrait could be made; the caller shows the placeholder instead."""


@dataclass
class Portrait:
    path: Path
    description: str
    hash: str
    style: str
    size: int
    media_type: str = MEDIA_TYPE
    source: str = "local"  # local | hosted | cache
    traits: dict[str, Any] | None = None
    placeholder: bool = False
    reason: str | None = None
    ms: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def metadata(self, character: str | None) -> dict[str, Any]:
        meta: dict[str, Any] = {"characterId": character, "descriptionHash": self.hash,
                                "description": kit.shorten(self.description, 300),
                                "alt": f"Portrait: {kit.shorten(self.description, 200)}",
                                "style": self.style, "width": self.size, "height": self.size,
                                "source": self.source, "placeholder": self.placeholder}
        if self.traits is not None:
            meta["traits"] = self.traits
        if self.reason:
            meta["reason"] = self.reason
        return meta


def file_name(digest: str, style: str, size: int, hosted: bool = False, ext: str = "png") -> str:
    return f"{digest[:24]}-{style}-{size}{'-hosted' if hosted else ''}.{ext}"


def is_image(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            head = fh.read(32)
    except OSError:
        return False
    return image_type(head) is not None


def traits_of(text: str) -> Traits:
    return read_traits(text, Dice(description_hash(text)))


def generate(text: str, conf: Settings, *, reuse: bool = True) -> Portrait:
    """The portrait of ``text`` in the configured style and size, in the storage folder.

    ``reuse``: an image already made from the same description, style and size is
    the portrait (it would come out byte for byte the same). Raises
    GenerationFailed when no image can be written or the timeout passes.
    """
    started = time.perf_counter()
    digest = description_hash(text)
    portrait = Portrait(path=conf.storage / file_name(digest, conf.style, conf.resolution),
                        description=text, hash=digest, style=conf.style, size=conf.resolution)
    try:
        with deadline(conf.timeout_s):
            conf.storage.mkdir(parents=True, exist_ok=True)
            if not os.access(conf.storage, os.W_OK | os.X_OK):
                raise _unwritable(conf, f"storage folder {conf.storage} is not writable")
            if conf.provider == "hosted":
                hosted = _hosted(text, conf, portrait)
                if hosted is not None:
                    portrait.ms = round((time.perf_counter() - started) * 1000, 1)
                    return hosted
            portrait.traits = traits_of(text).to_json()
            if reuse and is_image(portrait.path):
                portrait.source = "cache"
            else:
                dice = Dice(digest)
                traits = read_traits(text, dice)
                rows = render(traits, conf.style, conf.resolution, dice)
                write_atomic(portrait.path, png_bytes(conf.resolution, conf.resolution, rows))
    except GenerationFailed:
        raise
    except OSError as exc:
        raise _unwritable(conf, f"cannot write the portrait to {conf.storage}: "
                                f"{exc.strerror or exc}") from None
    portrait.ms = round((time.perf_counter() - started) * 1000, 1)
    return portrait


def _hosted(text: str, conf: Settings, portrait: Portrait) -> Portrait | None:
    """An OpenAI-compatible ``/images/generations`` call; None (with a warning) on any
    failure, and the local generator draws the portrait instead."""
    if not conf.endpoint or not conf.api_key:
        portrait.warnings.append("imageProvider is hosted but hostedEndpoint or apiKey is not set; "
                                 "drawing the portrait locally")
        return None
    prompt = (f"A {conf.style} head-and-shoulders character portrait, plain background: {text}")
    body = {"prompt": prompt[:3900], "n": 1, "size": f"{conf.resolution}x{conf.resolution}",
            "response_format": "b64_json"}
    if conf.model:
        body["model"] = conf.model
    request = urllib.request.Request(
        conf.endpoint.rstrip("/") + "/images/generations", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {conf.api_key}"})
    try:
        with urllib.request.urlopen(request, timeout=max(1.0, conf.timeout_s - 1.0)) as reply:
            doc = json.loads(reply.read(32 << 20))
        data = base64.b64decode(doc["data"][0]["b64_json"], validate=True)
    except (OSError, ValueError, KeyError, IndexError, TypeError, urllib.error.URLError) as exc:
        portrait.warnings.append(f"hosted image provider failed ({type(exc).__name__}: "
                                 f"{kit.shorten(str(exc), 200)}); drawing the portrait locally")
        return None
    media = image_type(data)
    if media is None:
        portrait.warnings.append("hosted image provider sent no PNG, JPEG or WebP image; "
                                 "drawing the portrait locally")
        return None
    ext = media.split("/")[1].replace("jpeg", "jpg")
    path = conf.storage / file_name(portrait.hash, conf.style, conf.resolution, True, ext)
    write_atomic(path, data)
    size = png_size(data)
    return Portrait(path=path, description=text, hash=portrait.hash, style=conf.style,
                    size=size[0] if size else conf.resolution, media_type=media, source="hosted",
                    warnings=portrait.warnings)


class GenerationTimeout(GenerationFailed):
    pass


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise GenerationTimeout in the body after ``seconds`` (SIGALRM; main thread only)."""
    def expire(signum: int, frame: Any) -> None:
        raise GenerationTimeout(f"generation took longer than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def placeholder(text: str, conf: Settings, reason: str) -> Portrait:
    """The shipped silhouette (drawn again into the temp folder if it is missing)."""
    path = SILHOUETTE
    if not is_image(path):
        path = Path(tempfile.gettempdir()) / "narratoria-portrait-silhouette.png"
        if not is_image(path):
            write_atomic(path, png_bytes(SILHOUETTE_SIZE, SILHOUETTE_SIZE,
                                         silhouette_rows(SILHOUETTE_SIZE)))
    return Portrait(path=path, description=text, hash=description_hash(text), style=conf.style,
                    size=SILHOUETTE_SIZE, source="placeholder", placeholder=True, reason=reason)


# -- the store ------------------------------------------------------------------------------------

def record_of(record: dict[str, Any]) -> dict[str, Any]:
    """A stored portrait record as scripts report it."""
    return {"characterId": record.get("characterId"), "imagePath": record.get("imagePath"),
            "descriptionHash": record.get("descriptionHash"),
            "description": record.get("description"), "generatedAt": record.get("generatedAt")}


def save_record(store: kit.Store, character: str, portrait: Portrait, *,
                shared: bool = False) -> dict[str, Any]:
    """Create or replace ``character``'s portrait record (the store keys them by character)
    in the playthrough, or with ``shared`` in the skill's records every playthrough sees."""
    changes = {"imagePath": str(portrait.path), "description": portrait.description,
               "generatedAt": kit.iso(kit.now())}
    current = store.get(DATA_TYPE, character, shared=shared)
    if current is not None and current.get("imagePath") == changes["imagePath"] \
            and current.get("descriptionHash") == portrait.hash:
        return current  # already this very portrait
    if current is None:
        try:
            return store.put(DATA_TYPE, {"characterId": character, **changes}, shared=shared)
        except kit.SkillFailure as failure:
            if "already stored" not in failure.message:
                raise
            # Another invocation stored it in between: replace theirs.
    return store.update(DATA_TYPE, character, changes, shared=shared)


def share_record(store: kit.Store, character: str, portrait: Portrait,
                 warnings: list[str]) -> bool:
    """Also keep ``character``'s portrait in the skill's shared records, so another
    playthrough finds it by id or description; a refusal is only a warning."""
    try:
        save_record(store, character, portrait, shared=True)
        return True
    except kit.SkillFailure as failure:
        warnings.append(f"not shared with other playthroughs: {failure.message}")
        return False


def open_store(out: kit.Emitter, warnings: list[str]) -> kit.Store | None:
    """The Store client, or None (and a warning) where there is no daemon to cache in."""
    try:
        return kit.Store()
    except kit.SkillFailure as failure:
        warnings.append(f"not cached: {failure.message}")
        return None


# -- events --------------------------------------------------------------------------------------

def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "character"


def emit_portrait(out: kit.Emitter, character: str | None, portrait: Portrait,
                  extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The asset event and the state patch that tell the UI where the portrait is."""
    asset_id = f"portrait-{slug(character or portrait.hash[:12])}"
    if portrait.placeholder:
        asset_id += "-placeholder"
    metadata = {**portrait.metadata(character), **(extra or {})}
    out.emit({"type": "asset", "assetId": asset_id, "kind": "image",
              "mediaType": portrait.media_type, "path": str(portrait.path), "metadata": metadata})
    if character is not None:
        out.emit({"type": "state_patch", "patch": {"portraits": {character: {
            "assetId": asset_id, "path": str(portrait.path), "descriptionHash": portrait.hash,
            "placeholder": portrait.placeholder}}}})
    return {"assetId": asset_id, "path": str(portrait.path)}


def deliver(out: kit.Emitter, character: str, text: str, conf: Settings, *, reuse: bool,
            verb: str, previous: dict[str, Any] | None = None,
            store: kit.Store | None = None) -> None:
    """Draw (or reuse) ``character``'s portrait of ``text``, cache it, report it.

    Events: warnings as ``log`` warn, the ``asset``, a ``state_patch`` on
    ``portraits.<characterId>``, a ``log`` with the details and ``done`` ok:true.
    A portrait that could not be made is the placeholder silhouette: the same
    events, with ``metadata.placeholder`` true and an error-level ``log``
    (``errorCode: generation_failed``); ``done`` stays ok so the executor keeps
    the asset (it drops the assets of failed invocations). A store that cannot
    be reached or refuses the record leaves the portrait uncached (a warning).
    """
    warnings: list[str] = []
    if store is None:
        store = open_store(out, warnings)
    record = None
    shared = False
    try:
        try:
            portrait = generate(text, conf, reuse=reuse)
        except GenerationFailed as exc:
            portrait = placeholder(text, conf, str(exc))
        warnings += portrait.warnings
        if store is not None and not portrait.placeholder:
            try:
                record = save_record(store, character, portrait)
            except kit.SkillFailure as failure:
                warnings.append(f"not cached: {failure.message}")
            if record is not None:
                shared = share_record(store, character, portrait, warnings)
    finally:
        if store is not None:
            store.close()
    for warning in warnings:
        out.log(warning, "warn")
    extra: dict[str, Any] = {"cached": record is not None, "shared": shared}
    if previous is not None:
        extra["previousPath"] = previous.get("imagePath")
        extra["descriptionChanged"] = previous.get("descriptionHash") != portrait.hash
    asset = emit_portrait(out, character, portrait, extra)
    fields = {"characterId": character, **asset, "descriptionHash": portrait.hash,
              "style": portrait.style, "size": portrait.size, "source": portrait.source,
              "cached": record is not None, "shared": shared, "ms": portrait.ms,
              "traits": portrait.traits}
    if portrait.placeholder:
        out.log(f"no portrait of {character}: {portrait.reason}; showing a placeholder silhouette",
                "error", errorCode="generation_failed", placeholder=True, **fields)
        out.emit({"type": "done", "ok": True,
                  "summary": f"no portrait of {character} could be made ({portrait.reason}); "
                             "a placeholder silhouette stands in"})
        return
    if previous is not None:
        fields["previous"] = record_of(previous)
    out.log(f"{verb} portrait", **fields)
    reused = " (reused from the cache)" if portrait.source == "cache" else ""
    out.emit({"type": "done", "ok": True,
              "summary": f"{verb} portrait of {character}{reused}: {kit.shorten(text, 120)}"})
