"""Argument types and options that several command groups share."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def add_skill_dirs(p: argparse._ActionsContainer) -> None:
    p.add_argument("--skills-dir", action="append", metavar="DIR",
                   help="an extra skill root (repeatable); later roots override earlier ones")


def add_exec_options(p: argparse._ActionsContainer) -> None:
    """How a plan runs in this process (``plan run``, ``turn --local``)."""
    p.add_argument("--state", metavar="FILE", help="initial session state (JSON object)")
    p.add_argument("--concurrency", type=int, metavar="N",
                   help="max concurrent skill processes (default: CPU count)")
    p.add_argument("--tool-timeout", type=float, metavar="S", help="per-tool timeout (30)")
    p.add_argument("--plan-timeout", type=float, metavar="S", help="per-plan timeout (60)")


def add_write(p: argparse._ActionsContainer) -> None:
    p.add_argument("--write", metavar="FILE", help="append the results to FILE (markdown)")
