"""What ships inside the package besides code: the built-in skills and campaigns.

They are package data of ``narratoria`` (``skills/`` and ``campaigns/`` beside
``runtime/``), found through :mod:`importlib.resources`, so a wheel installed
anywhere finds them as a checkout does. Both are run and read as plain files
(skills are executables), and wheels install unzipped, so the path is a real folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal


def bundled_dir(name: Literal["skills", "campaigns"]) -> Path:
    """The folder of the built-in ``skills`` or ``campaigns``."""
    from importlib.resources import files  # not at import: the CLI's start-up pays for it

    try:
        return Path(str(files("narratoria") / name))
    except NotADirectoryError:
        # An editable install (pip install -e) puts setuptools' path hook, which is no
        # folder, on narratoria's namespace path, and importlib.resources refuses it.
        import narratoria

        folders = (Path(entry) / name for entry in narratoria.__path__)
        return next(folder for folder in folders if folder.is_dir())


def package_root() -> Path:
    """The folder that holds the ``narratoria`` package's code (the checkout, or
    site-packages/narratoria in a wheel)."""
    return Path(__file__).resolve().parents[1]
