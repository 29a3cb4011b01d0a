"""Canonical names: the campaign's spelling wins over the model's.

The engine decides, the model narrates (docs/scene.md, "The engine decides").

The 135M narrator copies names badly (Leory -> Leira, Odile -> Odille) and invents
people. The engine therefore hands the narrator the canonical names of what is in the
scene (:func:`scene_names`: the present NPCs, the place, the player's items) and relays
the narrator's stream through :class:`NameRelay`, which

- corrects a misspelt campaign name to the campaign's own word, using the eval's
  lexicon and near-miss rule (``narration_scores.EntityLexicon.near_misses``: what the
  eval counts as misspelt is exactly what is corrected; one implementation);
- when the campaign forbids invented people (:func:`forbids_new_names`), replaces an
  invented named person with "someone": a capitalised name the campaign never writes,
  addressed by a title ("Captain Jonas", "Lord Brindlemark"), introduced ("a man named
  Jonas") or the subject of a speaking or gesturing verb ("Mara nods"); and a rank
  used as a name ("the King", "the Duke's men": ``_RANKS``) the campaign never
  capitalises. Precision over recall: a thing that opens a sentence and "whispers" or
  "answers" ("Wind whispers", ``_VOICES``) is left alone, and so is every capitalised
  word anywhere in the campaign's files ("Aldo", named only in Orla Finch's prose;
  "the Warden" where the campaign has its Tithe Wardens).
- leaves an invented *place* alone ("the road to Brindlemark"): it is no person, a
  stand-in ("somewhere") would garble the sentence, and the menu never offers to go
  anywhere the campaign does not have (``runtime/planner/choices.py``). A capitalised
  word is a person only by the cues above, so "Brindlemark nods" is someone.

Streaming: the relay holds back the last :data:`LOOKAHEAD_WORDS` words (a name of up
to three words and the verb after it) and never emits a piece that a later piece could
still change, so a client never sees the wrong spelling. A correction never crosses
into text already emitted.

A campaign says whether it allows invented people with the manifest field
``invented_names: allow | forbid``. Without it, a campaign forbids them when its
``hydration_guidance`` says so ("never a second stranger", "never invent a
character") or declares its people canon ("the people, places, laws and dates in these
files are canon", "everything named in these files is canon"), and allows them
otherwise. Forbidding is about *named* people only: a guidance that also invites
"minor townsfolk" (long_ebb) still gets its fishwives and old men, nameless.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from narratoria.runtime.planner.narration_scores import EntityLexicon, garbles

log = logging.getLogger(__name__)

LOOKAHEAD_WORDS = 4
CONTEXT_CHARS = 160            # emitted text kept to judge the next words by
INVENTED_NAMES = ("allow", "forbid")
STAND_IN = "someone"
# hydration_guidance that forbids new people: "never a second stranger", "never invent
# a character", "no new named characters".
_FORBIDS = re.compile(
    r"\b(?:never|no|not|don't|do not)\b[^.;]{0,40}?\b(?:second|new|other|another|extra|"
    r"invent(?:ed)?(?: a| any)?(?: new)?)\s+(?:named\s+)?(?:stranger|strangers|characters?|"
    r"people|persons?|npcs?|names?)\b", re.IGNORECASE)
# A guidance that makes the files' people canon: "the people, places … in these files are
# canon", "everything named in these files is canon".
_CANON_PEOPLE = re.compile(
    r"\b(?:people|persons|characters|cast|npcs|everyone|everybody|everything named|"
    r"all (?:the )?names)\b[^.;]{0,80}?\b(?:are|is)\s+canon\b", re.IGNORECASE)
# Ranks a person is called by alone, as a name: "the King", "the Duke's men".
_RANKS = frozenset("""king queen prince princess duke duchess earl baron baroness count
countess emperor empress regent chancellor magistrate mayor governor bishop abbot abbess
archbishop cardinal lord lady master mistress captain sergeant commander general admiral
marshal sheriff steward overseer warden reeve alderman councillor judge high-priest
priestess""".split())
_TITLES = frozenset("""captain sergeant lieutenant commander master mistress lady lord sir dame
brother sister father mother aunt uncle mr mrs ms miss dr doctor elder old young widow
granny grandfather grandmother keeper warden""".split()) | _RANKS
_RANK_NAME = re.compile(r"\b([Tt]he)\s+([A-Z][a-z]+)\b(?!-[A-Za-z])(?!\s+[A-Z])")
# Verbs whose subject is a person: said of a capitalised unknown word, it names someone.
_PERSON_VERBS = frozenset("""says said asks asked replies replied nods nodded smiles smiled
whispers whispered shouts shouted laughs laughed frowns frowned grins grinned sighs sighed
mutters muttered answers answered explains explained insists insisted warns warned
cries cried winks winked shrugs shrugged murmurs murmured chuckles chuckled greets greeted
introduces introduced""".split())
_NOT_NAMES = frozenset("""you i he she it we they someone somebody everyone everybody nobody
anyone one both all none each another the a an this that these those who which then
suddenly finally slowly quietly softly there here""".split())
_NAME = r"[A-Z][a-z]+(?:['’-][A-Za-z]+)?"
_SEQUENCE = re.compile(rf"{_NAME}(?:\s+{_NAME}){{0,2}}")
# A sentence starts at the text's start, after an end mark, a line break or an opening
# quote ('"Come in," Mara says': the quote there closes, Mara is mid-sentence).
_SENTENCE_START = re.compile(r"(?:^|[.!?…]\s*[\"”’']?\s+|\n\s*|(?:^|\s)[\"“]\s*)$")
# Things that whisper, answer and call without being anyone: "Wind whispers".
_VOICES = frozenset("""wind winds silence voice voices sea tide tides fire flames snow storm
night darkness dark bell bells water waters rain door doors house stone stones light
shadow shadows something nothing everything time fate death hunger cold frost ice
mist fog smoke thunder echo echoes heart memory dream dreams""".split())


@dataclass(frozen=True)
class Fix:
    start: int
    end: int
    text: str
    why: str                   # misspelt | recased | invented
    was: str = ""              # the words replaced


@dataclass(frozen=True)
class Canon:
    """What the engine needs of a campaign to keep its names straight."""

    lexicon: EntityLexicon
    known_words: frozenset[str] = frozenset()   # capitalised words of its files, lower case
    forbid_new_names: bool = False
    rating: str = ""

    def name_of(self, entity_id: str) -> str | None:
        entity = self.lexicon.get(entity_id)
        return entity.name if entity is not None else None


def forbids_new_names(manifest_fields: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether a manifest forbids invented people (module doc), and a problem ("" if
    none) when ``invented_names`` holds something else than allow or forbid."""
    given = manifest_fields.get("invented_names")
    if given is not None:
        if isinstance(given, str) and given.strip().lower() in INVENTED_NAMES:
            return given.strip().lower() == "forbid", ""
        shown = repr(given) if len(repr(given)) <= 40 else repr(given)[:40] + "…"
        problem = f"invented_names: expected allow or forbid, got {shown}"
    else:
        problem = ""
    guidance = manifest_fields.get("hydration_guidance")
    forbid = bool(isinstance(guidance, str) and (_FORBIDS.search(guidance)
                                                 or _CANON_PEOPLE.search(guidance)))
    if problem:
        problem += f"; read from hydration_guidance instead ({'forbid' if forbid else 'allow'})"
    return forbid, problem


def known_words(texts: Iterable[str]) -> frozenset[str]:
    """Every capitalised word of ``texts``, lower case: words the campaign writes (a
    possessive also as its name: "the King's Riders" writes "king")."""
    words = {w.lower() for text in texts for w in re.findall(r"\b[A-Z][A-Za-z'’-]+", text)}
    return frozenset(words | {re.sub(r"['’]s$", "", w) for w in words})


def load_canon(root: Path, manifest_fields: Mapping[str, Any]) -> Canon:
    """The canon of the campaign folder ``root`` (reads its files: call once per load)."""
    from narratoria.runtime.campaign.discovery import discover
    from narratoria.runtime.planner.narration_eval import campaign_facts

    facts = campaign_facts(root)
    texts = []
    for f in discover(root):
        if getattr(f, "kind", "") == "content" and f.path.suffix.lower() in (
                ".md", ".txt", ".yml", ".yaml", ".json"):
            try:
                texts.append(f.path.read_text("utf-8"))
            except (OSError, UnicodeDecodeError):
                continue
    forbid, problem = forbids_new_names(manifest_fields)
    if problem:
        log.warning("campaign %s: %s", facts.id, problem)
    return Canon(facts.lexicon, known_words(texts), forbid, facts.content_rating or "")


# -- names for the narrator --------------------------------------------------------------

def scene_names(canon: Canon, state: Mapping[str, Any], npc_ids: Sequence[str] = (),
                texts: Sequence[str] = ()) -> tuple[str, ...]:
    """The canonical names of the present NPCs (``npc_ids`` and the people ``texts`` —
    the action, the last narration — name), the place and the player's items."""
    names: list[str] = []
    for npc in npc_ids:
        if (name := canon.name_of(npc)) is not None:
            names.append(name)
    for text in texts:
        for mention in canon.lexicon.find(text):
            entity = canon.lexicon.get(mention.entity)
            if entity is not None and entity.kind == "npc":
                names.append(entity.name)
    world = state.get("world") if isinstance(state.get("world"), Mapping) else {}
    place = world.get("location") or state.get("location")
    if isinstance(place, str) and (name := canon.name_of(place)) is not None:
        names.append(name)
    player = state.get("player") if isinstance(state.get("player"), Mapping) else {}
    inventory = player.get("inventory")
    items = inventory.keys() if isinstance(inventory, Mapping) else (
        [i for i in inventory if isinstance(i, str)] if isinstance(inventory, list) else [])
    for item in items:
        if (name := canon.name_of(str(item))) is not None:
            names.append(name)
    return tuple(dict.fromkeys(names))


# -- corrections ---------------------------------------------------------------------------

def fixes(canon: Canon, text: str, allowed: frozenset[str] = frozenset()) -> list[Fix]:
    """Every correction ``text`` needs, in order, none overlapping: campaign names
    written in lower case (:func:`recasings`), misspelt campaign names, and invented people when the campaign forbids them. ``allowed``: more
    words (lower case) that are never an invented name (the player's own name, the
    names the player's action used)."""
    found: list[Fix] = recasings(canon, text)
    for m in canon.lexicon.near_misses(text):
        entity = canon.lexicon.get(m.entity)
        if entity is None:
            continue
        word = _closest(m.alias, entity)
        if word and word != m.alias:
            found.append(Fix(m.start, m.end, word, "misspelt", m.alias))
    if canon.forbid_new_names:
        taken = [(f.start, f.end) for f in found]
        taken += [(m.start, m.end) for m in canon.lexicon.find(text)]
        for fix in _invented(canon, text, allowed):
            if not any(fix.start < e and s < fix.end for s, e in taken):
                found.append(fix)
    return sorted(found, key=lambda f: f.start)


def recasings(canon: Canon, text: str) -> list[Fix]:
    """Campaign names written all in lower case ("ask odile venn about the heartglass",
    as a player types) spelled as the campaign does ("Odile Venn", "the Undercourt"). One
    ordinary word stays as written ("the quay" is not the Quay, "the boathook" a thing):
    only a name of several words, or one word of a person, place or group that is no
    common English word, is recased; and one word of a name of five letters or more,
    typed in lower case or with a typo (:func:`_lower_names`)."""
    out: list[Fix] = []
    for m in canon.lexicon.find(text):
        entity = canon.lexicon.get(m.entity)
        if entity is None or m.alias != m.alias.lower():
            continue
        written = " ".join(m.alias.split()).lower()
        if " " not in written and (written in canon.lexicon.common or entity.kind == "item"):
            continue  # "the quay", "the boathook": a thing's one word reads as a word
        for name in (entity.name, *entity.aliases):
            bare = re.sub(r"^(?:the|The)\s+", "", " ".join(name.split()))
            if bare.lower() == written and bare != written:
                out.append(Fix(m.start, m.end, bare, "recased", m.alias))
                break
    return sorted(out + _lower_names(canon, text, out), key=lambda f: f.start)


# Words before which a lower-case word is a thing, not a name ("the cask", "my wick").
_DETERMINER = re.compile(r"(?:\b(?:the|a|an|my|your|his|her|its|our|their|this|that|these|"
                         r"those|some|any|no|every|each)\s+)$", re.IGNORECASE)
_LOWER_WORD = re.compile(r"(?<![\w'’-])[a-z][a-z'’-]{4,}(?![\w'’-])")
_NAME_KINDS = ("npc", "faction", "location")


def _lower_names(canon: Canon, text: str, taken: Sequence[Fix]) -> list[Fix]:
    """One word of a person's, group's or place's name typed in lower case ("ask
    thaddeus", "ask fetterlok"), spelled as the campaign does ("Thaddeus", "Fetterlock"):
    five letters or more, no common English word, never after a determiner ("the
    cask", "my wick" are things), and a misspelling only as close as a player's typo
    (``near_misses``' strict rule)."""
    words = {w.lower(): w for e in canon.lexicon.entities if e.kind in _NAME_KINDS
             for w in e.proper if len(w) >= 5}
    out: list[Fix] = []
    for m in _LOWER_WORD.finditer(text):
        word = m.group(0)
        before = text[max(0, m.start() - 8):m.start()]
        if word in canon.lexicon.common or _DETERMINER.search(before) \
                or any(f.start < m.end() and m.start() < f.end for f in taken):
            continue
        if word in words:
            out.append(Fix(m.start(), m.end(), words[word], "recased", word))
            continue
        close = [w for w in words if garbles(word, w, strict=True)]
        if close:
            best = max(sorted(close), key=lambda w: difflib.SequenceMatcher(None, word, w).ratio())
            out.append(Fix(m.start(), m.end(), words[best], "misspelt", word))
    return out


def recased(canon: Canon, text: str) -> str:
    """``text`` with :func:`recasings` applied (the player's words, for the narrator)."""
    return apply(text, recasings(canon, text))


def correct(canon: Canon, text: str, allowed: frozenset[str] = frozenset()) -> str:
    """``text`` with every fix applied."""
    return apply(text, fixes(canon, text, allowed))


def apply(text: str, found: Sequence[Fix], start: int = 0, end: int | None = None) -> str:
    """``text[start:end]`` with the fixes that lie inside it applied."""
    end = len(text) if end is None else end
    out, at = [], start
    for fix in found:
        if fix.start < start or fix.end > end:
            continue
        out.append(text[at:fix.start])
        out.append(fix.text)
        at = fix.end
    out.append(text[at:end])
    return "".join(out)


def _closest(word: str, entity: Any) -> str:
    """The campaign's word ``word`` garbles: the nearest capitalised word of its names."""
    names = {w for a in (entity.name, *entity.aliases, *entity.proper) for w in a.split()
             if w[:1].isupper() and len(w) >= 3}
    if not names:
        return ""
    best = max(sorted(names), key=lambda n: difflib.SequenceMatcher(
        None, word.lower(), n.lower()).ratio())
    return best.upper() if word.isupper() and len(word) > 1 else best


def _invented(canon: Canon, text: str, allowed: frozenset[str]) -> list[Fix]:
    ranks = _ranks(canon, text, allowed)
    out: list[Fix] = []
    for m in _SEQUENCE.finditer(text):
        words = m.group(0).split()
        start, end = m.start(), m.end()
        if words[0].lower() in ("the", "a", "an") and len(words) > 1:
            # "The Lord Mayor": the article opens the sentence, a titled name follows it;
            # "The Storm whispers" is a thing.
            if not (words[1].lower() in _TITLES and len(words) > 2):
                continue
            start += len(words[0]) + 1
            words = words[1:]
        title = words[0].lower() in _TITLES and len(words) > 1
        names = words[1:] if title else words
        if any(_known(canon, w, allowed) for w in names):
            continue
        before = text[max(0, start - 12):start]
        after = text[end:end + 40]
        introduced = re.search(r"\b(?:named|called)\s+$", before)
        verb = re.match(r"^[,]?\s+(\w+)", after)
        acts = verb is not None and verb.group(1).lower() in _PERSON_VERBS
        at_start = _SENTENCE_START.search(text[:start]) is not None
        if not (title or introduced or acts):
            continue
        if at_start and not title and len(names) == 1 and names[0].lower() in _VOICES:
            continue  # "Wind whispers": a thing, capitalised because it opens a sentence
        if introduced:
            # "a man named Jonas" -> "a man": the description stays, the name goes.
            cut = re.search(r"\s*,?\s*\b(?:named|called)\s+$", text[:start])
            out.append(Fix(cut.start() if cut else start, end, "", "invented", m.group(0)))
            continue
        article = re.search(r"\b([Tt]he)\s+$", text[:start]) if title else None
        if article is not None:
            # "the Lord Mayor" -> "someone", never "the someone".
            start = article.start()
            at_start = _SENTENCE_START.search(text[:start]) is not None
        out.append(Fix(start, end, STAND_IN.capitalize() if at_start else STAND_IN, "invented",
                       text[start:end]))
    # "the Duke laughs": the rank's fix, article and all, wins over the name's.
    out = [f for f in out if not any(r.start < f.end and f.start < r.end for r in ranks)]
    return sorted(ranks + out, key=lambda f: f.start)


def _ranks(canon: Canon, text: str, allowed: frozenset[str]) -> list[Fix]:
    """A rank used as a name, "the King" (module doc), unless the campaign writes it."""
    out: list[Fix] = []
    for m in _RANK_NAME.finditer(text):
        rank = m.group(2).lower()
        if rank not in _RANKS or _known(canon, rank, allowed) or \
                _known(canon, rank + "s", allowed):
            continue
        at_start = _SENTENCE_START.search(text[:m.start()]) is not None
        out.append(Fix(m.start(), m.end(), STAND_IN.capitalize() if at_start else STAND_IN,
                       "invented", m.group(0)))
    return out


def people_named(text: str, known: Iterable[str] = ()) -> list[str]:
    """The people ``text`` calls by a name or a rank ("Brindlemark" of "Brindlemark
    nods", "the King", "Lord Brindlemark") that none of ``known`` (names, any case)
    holds: by the cues invented people are found by (module doc), whatever the
    campaign allows."""
    words = frozenset(w.lower() for name in known for w in re.findall(r"[A-Za-z'’-]+", name))
    bare = Canon(EntityLexicon(()), known_words=words)
    return list(dict.fromkeys(f.was for f in _invented(bare, text, frozenset())))


# Rulers a narration may bring in by rank alone, lower case: "the king".
_RULERS = frozenset("""king queen prince princess duke duchess earl baron baroness emperor
empress regent""".split())


def invented_people(text: str, known: Iterable[str]) -> list[str]:
    """The people ``text`` brings in that none of ``known`` (the names of the scene's
    world, the campaign's, the player's words) has: called by a name or a rank
    (:func:`people_named`), or a ruler by rank alone ("the king")."""
    known = list(known)
    words = {w.lower() for name in known for w in re.findall(r"[A-Za-z'’-]+", name)}
    found = people_named(text, known)
    found += [f"the {w}" for w in re.findall(r"\b[Tt]he ([a-z]+)\b", text)
              if w in _RULERS and w not in words]
    return list(dict.fromkeys(found))


def names_anyone(line: str, people: Sequence[str]) -> bool:
    """Whether ``line`` names one of ``people`` ("Lord Brindlemark" by "Brindlemark",
    "the King" by "king")."""
    for person in people:
        words = [w for w in person.split() if w.lower() not in ("the", "a", "an")]
        core = [w for w in words if w.lower() not in _TITLES] or words[-1:]
        if any(re.search(rf"(?<![\w'’-]){re.escape(w)}(?![\w-])", line, re.IGNORECASE)
               for w in core):
            return True
    return False


def _known(canon: Canon, word: str, allowed: frozenset[str]) -> bool:
    lower = re.sub(r"['’]s$", "", word).lower()
    return lower in _NOT_NAMES or lower in canon.known_words or lower in allowed


# -- the stream ----------------------------------------------------------------------------

class NameRelay:
    """Corrects a narration stream on a word-level lookahead (module doc).

    ``feed`` takes a piece and returns the text that is now safe to show (maybe "");
    ``flush`` returns the rest once the stream ended."""

    def __init__(self, canon: Canon, allowed: frozenset[str] = frozenset(),
                 lookahead: int = LOOKAHEAD_WORDS) -> None:
        self.canon, self.allowed, self.lookahead = canon, allowed, lookahead
        self.context = ""        # the end of what was emitted, corrected
        self.pending = ""        # received, not yet emitted
        self.changes: list[Fix] = []

    def feed(self, piece: str) -> str:
        self.pending += piece
        starts = [m.start() for m in re.finditer(r"\S+", self.pending)]
        if len(starts) <= self.lookahead:
            return ""
        return self._emit(starts[-self.lookahead])

    def flush(self) -> str:
        return self._emit(len(self.pending), final=True)

    def verbatim(self, text: str) -> str:
        """``text`` as written, after what is pending: the engine's lead, whose names are
        the campaign's and whose beat prose is the author's ("At the ferry landing" is
        not to be recased to the place's heading)."""
        out = self.flush() if self.pending else ""
        self.context = (self.context + text)[-CONTEXT_CHARS:]
        return out + text

    def _emit(self, cut: int, final: bool = False) -> str:
        window = self.context + self.pending
        base = len(self.context)
        found = [f for f in fixes(self.canon, window, self.allowed) if f.end > base]
        cut_at = base + cut
        if not final:
            for fix in found:  # never split a correction: hold it back whole
                if fix.start < cut_at < fix.end:
                    cut_at = fix.start
        out = apply(window, [f for f in found if f.start >= base], base, cut_at)
        self.changes += [f for f in found if f.start >= base and f.end <= cut_at]
        self.pending = window[cut_at:]
        self.context = (self.context + out)[-CONTEXT_CHARS:]
        return out


__all__ = ["Canon", "Fix", "INVENTED_NAMES", "LOOKAHEAD_WORDS", "NameRelay", "apply",
           "correct", "fixes", "forbids_new_names", "known_words", "load_canon",
           "invented_people", "names_anyone", "people_named", "scene_names"]
