"""``narratoria train``: fit the runtime's shipped classifiers again from labelled data.

``train deeds`` fits the deed sense (:mod:`narratoria.runtime.planner.deed_sense`) from
datasets in the planner eval's JSONL: a case's side is its first expected
npc-perception or reputation effect (up: kind, down: harmful, query: a standing
question), and a case expecting neither is an act that changes no one's opinion.
Keep a set you never train on, and measure on it with ``eval planner``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from narratoria.clients.output import ExitCode, fail, print_json

SKILLS_MARK = "skills:route-examples"  # recorded among the datasets when they were used


def register(sub: argparse._SubParsersAction) -> None:
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
    deeds.add_argument("--no-skill-examples", action="store_true",
                       help="leave out the built-in non-deed skills' route examples "
                            "(by default they are acts of no one)")
    deeds.add_argument("--epochs", type=int, default=None, metavar="N",
                       help="passes of the embedder's adapter over the examples (default 3)")
    deeds.add_argument("--no-adapter", action="store_true",
                       help="fit the regressions on the plain embedder (no adapter: quicker, "
                            "reads worse)")
    deeds.add_argument("--json", action="store_true", help="print the summary as JSON")
    deeds.set_defaults(func=cmd_train_deeds)


# The built-in skills whose route examples are no deed: asking for a roll, a portrait,
# a recap or choices changes no one's opinion ("I try to pick the lock before the guard
# comes back" is the dice's). The deed skills' own examples carry no direction.
NOT_DEED_SKILLS = ("character-portraits", "dice-roller", "memory", "player-choices",
                   "storyteller")


def deed_examples(datasets: Sequence[str | Path], *, skill_examples: bool = True) -> list[Any]:
    """The deed sense's training examples: every case of ``datasets`` with its side, and
    (``skill_examples``) the route examples of :data:`NOT_DEED_SKILLS` as acts of no one.
    Raises OSError or DatasetError for a dataset that cannot be read."""
    from narratoria.runtime.planner import deed_sense
    from narratoria.runtime.planner import evaluate as ev
    from narratoria.runtime.skills import SkillRegistry, builtin_skills_dir

    examples: list[deed_sense.Example] = []
    entities: dict[str, Any] = {}
    for path in datasets:
        for case in ev.load_dataset(path):
            effects = [(e.skill, e.change) for e in case.effects]
            examples.append(deed_sense.Example(
                case.input, ev.case_entities(case.campaign, entities),
                deed_sense.side_of_case(case.expected_skills, effects),
                deed_sense.target_kind_of_case(case.expected_skills, effects)))
    if skill_examples:
        skills = SkillRegistry([builtin_skills_dir()]).skills
        examples += [deed_sense.Example(text, (), deed_sense.NONE)
                     for name in NOT_DEED_SKILLS if name in skills
                     for text in skills[name].route_examples]
    return examples


def cmd_train_deeds(args: argparse.Namespace) -> int:
    from narratoria.runtime.planner import deed_sense
    from narratoria.runtime.planner import evaluate as ev

    try:
        examples = deed_examples(args.dataset, skill_examples=not args.no_skill_examples)
    except (OSError, ev.DatasetError) as exc:
        return fail(str(exc), ExitCode.BAD_INPUT)
    if not examples:
        return fail("the datasets hold no cases", ExitCode.BAD_INPUT)
    if args.epochs is not None and args.epochs < 1:
        return fail(f"--epochs: expected 1 or more, got {args.epochs}", ExitCode.BAD_INPUT)
    from narratoria.runtime.embedding import shared_local
    from narratoria.runtime.planner.tuned_encoder import EPOCHS, print_progress

    started = time.perf_counter()
    embedder = shared_local()
    adapter = None
    if not args.no_adapter:
        print(f"fitting the embedder's adapter on {len(examples)} examples ...",
              file=sys.stderr, flush=True)
        adapter = deed_sense.train_adapter(examples, embedder, progress=print_progress,
                                           epochs=args.epochs or EPOCHS)
    print(f"embedding {len(examples)} examples ...", file=sys.stderr, flush=True)
    shown = [_shown(Path(p)) for p in args.dataset]
    model = deed_sense.fit(examples, embedder, adapter=adapter,
                           datasets=shown if args.no_skill_examples else [*shown, SKILLS_MARK])
    out = Path(args.out) if args.out else deed_sense.MODEL_PATH
    model.save(out)
    summary = {"out": str(out.resolve()), "examples": len(examples),
               "sides": dict(Counter(e.side for e in examples)),
               "vocabulary": len(model.vocabulary), "embedder": model.embedder,
               "adapter_rank": adapter.rank if adapter is not None else None,
               "digest": model.digest, "seconds": round(time.perf_counter() - started, 1)}
    if args.json:
        print_json(summary)
    else:
        for key, value in summary.items():
            print(f"{key:<11} {value}")
    return ExitCode.SUCCESS


def _shown(path: Path) -> str:
    """A dataset as recorded in the weights: relative to here when it is under here."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
