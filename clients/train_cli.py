"""``narratoria train``: fit the runtime's shipped classifiers again from labelled data.

``train deeds`` fits the deed sense (:mod:`narratoria.runtime.planner.deed_sense`) from
datasets in the planner eval's JSONL: a case's side is its first expected
npc-perception or reputation effect (up: kind, down: harmful, query: a standing
question), and a case expecting neither is an act that changes no one's opinion.
Keep a set you never train on, and measure on it with ``eval planner``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any


def add_train_parser(sub: Any) -> None:
    train = sub.add_parser("train", help="fit the runtime's shipped classifiers from datasets")
    train_sub = train.add_subparsers(dest="train_command", metavar="MODEL", required=True)
    deeds = train_sub.add_parser(
        "deeds", help="fit the deed sense (kind deed, harmful deed, standing question)",
        description="Each dataset is planner-eval JSONL with \"effects\". Writes the weights "
                    "(default: the shipped ones) and prints what was fitted; progress goes "
                    "to stderr.")
    deeds.add_argument("--dataset", required=True, action="append", metavar="FILE.jsonl",
                       help="a labelled dataset (repeat for more)")
    deeds.add_argument("--out", metavar="FILE.npz", help="where to write the weights "
                       "(default: the shipped deed_sense.npz)")
    deeds.add_argument("--json", action="store_true", help="print the summary as JSON")
    deeds.set_defaults(func=cmd_train_deeds)


def cmd_train_deeds(args: argparse.Namespace) -> int:
    from narratoria.runtime.planner import deed_sense
    from narratoria.runtime.planner import evaluate as ev

    examples: list[deed_sense.Example] = []
    entities: dict[str, Any] = {}
    try:
        for path in args.dataset:
            for case in ev.load_dataset(path):
                side = deed_sense.side_of_case(case.expected_skills,
                                               [(e.skill, e.change) for e in case.effects])
                examples.append(deed_sense.Example(
                    case.input, ev.case_entities(case.campaign, entities), side))
    except (OSError, ev.DatasetError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not examples:
        print("error: the datasets hold no cases", file=sys.stderr)
        return 2
    from narratoria.runtime.embedding import shared_local

    print(f"embedding {len(examples)} examples ...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    model = deed_sense.fit(examples, shared_local(),
                           datasets=[_shown(Path(p)) for p in args.dataset])
    out = Path(args.out) if args.out else deed_sense.MODEL_PATH
    model.save(out)
    summary = {"out": str(out.resolve()), "examples": len(examples),
               "sides": dict(Counter(e.side for e in examples)),
               "vocabulary": len(model.vocabulary), "embedder": model.embedder,
               "digest": model.digest, "seconds": round(time.perf_counter() - started, 1)}
    if args.json:
        print(json.dumps(summary))
    else:
        for key, value in summary.items():
            print(f"{key:<11} {value}")
    return 0


def _shown(path: Path) -> str:
    """A dataset as recorded in the weights: relative to here when it is under here."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
