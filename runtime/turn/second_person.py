"""The player's words in the second person: "I climb the wall" -> "You climb the wall".

The engine writes the narration's first sentence itself (``resolution.py``: "You try to
climb the sea wall, but you fail."), and a small narrator continues prose written as
"You …" far better than a chat request (DESIGN.md). Both need the action as the
story tells it, so the rewrite lives here, once, deterministic and pure.

Invariants:

- Only the player's own first person changes (I, me, my, mine, myself, I'm, am, was,
  and the plural: "how long we have" is "how long you have", "our salt" "your salt",
  the "you" of a party); quoted speech stays as the player wrote it ("I say "I am
  ready"" keeps the quote).
- What cannot be rewritten honestly returns None rather than a guess: a question
  ("Can I climb it?"), words addressed to someone ("Wick, show me the path"), an
  empty line. Callers then use a sentence of their own.
- :func:`beat_sentence` turns a plot beat's ``description`` ("the player meets Meret
  Alder and learns where the money went") into story prose ("you meet Meret Alder and
  learn where the money went"), or None when "player" would survive the rewrite.
"""

from __future__ import annotations

import re

from narratoria.runtime.sentences import ends_sentence, first_sentence

MAX_PHRASE = 160  # characters of an action kept in a sentence: a line, not a page

# Words a line starts with that are not an imperative verb ("The wall is high").
_NOT_IMPERATIVE = frozenset("""
a an the this that these those my your his her its our their some any no every each
i we you he she they it me us him them what why how where when who whom which whose
can could should would will shall may might must do does did is are was were am be
let's lets please maybe perhaps yes no okay ok hello hi hey so and but or then now
""".split())
_QUESTION_START = frozenset({"what", "why", "how", "where", "when", "who", "whom", "which",
                             "whose", "can", "could", "should", "would", "will", "shall",
                             "may", "might", "must", "do", "does", "did", "is", "are", "was",
                             "were", "am"})
# First person -> second person, word by word (outside quotes).
_SWAP = {"i": "you", "me": "you", "my": "your", "mine": "yours", "myself": "yourself",
         "i'm": "you're", "i've": "you've", "i'll": "you'll", "i'd": "you'd",
         "i’m": "you’re", "i’ve": "you’ve", "i’ll": "you’ll", "i’d": "you’d",
         "we": "you", "us": "you", "our": "your", "ours": "yours", "ourselves": "yourselves",
         "we're": "you're", "we've": "you've", "we'll": "you'll", "we'd": "you'd",
         "we’re": "you’re", "we’ve": "you’ve", "we’ll": "you’ll", "we’d": "you’d"}
_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*")
# The player (or the party) as a line's subject: "I climb", "We ride out at dawn".
_OPENERS = frozenset(w for w in _SWAP if w.split("'")[0].split("’")[0] in ("i", "we"))
# What a player puts before the deed itself: "I try to", "I roll 2d6 to", "I carefully".
_ATTEMPT = re.compile(
    r"^(?:(?:try|tries|attempt|attempts|want|wants|mean|means|decide|decides|set out|"
    r"do my best|do your best|roll(?: (?:a |the )?(?:\d*d\d+(?:[+-]\d+)?|dice|die))?|"
    r"dare|manage|hurry|rush|quickly try|carefully try)\s+to\s+|"
    r"(?:make (?:a |an )?)?[a-z]+ (?:check|save) (?:to|for)\s+|"
    r"(?:quickly|carefully|slowly|quietly|bravely|desperately|cautiously|boldly)\s+)",
    re.IGNORECASE)
# "Strength check to lift the gate", "Make a stealth check to slip by": a roll asked for a deed.
_CHECK_FOR = re.compile(r"^(?:(?:I )?make (?:a |an )?)?[A-Za-z]+ (?:check|save) (?:to|for) (.+)$",
                        re.IGNORECASE)
# "… and roll to persuade her", "…, rolling for it": the dice request, not the deed.
_ROLL_TAIL = re.compile(r"(?:(?:,\s*|\s+and\s+|\s+then\s+)(?:and\s+)?(?:roll|rolling)\b.*|"
                        r"[.;!]\s*(?:roll|let the dice)\b.*)$", re.IGNORECASE)


# Words that open a clause or phrase put before the player's own ("When the valet
# grabs the book, I shove him back", "At dawn we ride out", "Carefully, I climb").
_FRONTING = frozenset("""
when whenever as once while after before if until since though although unless because
at in on by with without during from behind beneath under inside outside across through
tonight today tomorrow later now then meanwhile suddenly finally first next so and but
still again instead here there the moment
""".split())
# Fronting words read as their own beat: "Then you climb", not "Then, you climb".
_RUN_ON = frozenset("then so and but now still again finally first next suddenly meanwhile "
                    "instead".split())
_PLAYER_AFTER_COMMA = re.compile(r",\s*(?:i|we)\s+(?=[a-z])", re.IGNORECASE)
_PLAYER_AFTER_SPACE = re.compile(r"\s(?:i|we)\s+(?=[a-z])", re.IGNORECASE)


def opens_clause(word: str) -> bool:
    """Does ``word`` (lower case) open a clause or phrase put before the player's own
    ("When …", "After dark", "Carefully")?"""
    return word in _FRONTING or (word.endswith("ly") and len(word) > 3)


def _fronted(text: str, first: str) -> str | None:
    """``text`` told in the second person when something is put before the player's own
    clause ("When the valet grabs the book, I shove him back" -> "When the valet grabs
    the book, you shove him back"), or None."""
    if not opens_clause(first):
        return None
    found = _PLAYER_AFTER_COMMA.search(text, 2) or _PLAYER_AFTER_SPACE.search(text, 2)
    if found is None or found.start() > 160:
        return None
    head, rest = text[:found.start()].strip(), text[found.end():]
    main = you_form("I " + rest) if rest else None
    if main is None or not head:
        return None
    joint = " " if head.lower() in _RUN_ON else ", "
    return _swap(head[:1].upper() + head[1:]) + joint + "y" + main[1:]


def _split_fronted(text: str) -> str | None:
    """The player's own clause after what is put before it, in the first person."""
    found = _PLAYER_AFTER_COMMA.search(text, 2) or _PLAYER_AFTER_SPACE.search(text, 2)
    return "I " + text[found.end():] if found is not None else None


def you_form(action: str) -> str | None:
    """``action`` as a second-person sentence without its end mark ("You climb the sea
    wall"), or None when it is not a deed the story can retell (module doc)."""
    text = " ".join(action.split()).strip()
    if not text or text.endswith("?"):
        return None
    text = text.rstrip(".!…")
    if text[:1] in "\"“”":
        return None  # the player's words come first: theirs, not a deed to retell
    words = _WORD.findall(text)
    if not words:
        return None
    first = words[0].lower()
    if first not in _OPENERS and (told := _fronted(text, first)) is not None:
        return told
    if re.match(r"^[A-Za-z][\w'’ -]{0,40},", text) and first not in ("i", "we", "then", "so"):
        return None  # "Wick, show me the safe paths": words to someone, not a deed
    if first in _QUESTION_START:
        return None
    check = _CHECK_FOR.match(text)
    if check:  # "Strength check to lift the gate": the player asks to try the deed
        body = "You try to " + _swap(check.group(1))
    elif first in _OPENERS:
        body = _swap(text)
    elif first not in _NOT_IMPERATIVE and first not in _FRONTING:
        body = "You " + text[:1].lower() + _swap(text[1:])  # a menu's "Climb the wall"
    else:
        return None
    if re.search(r"\byou\b", _unquoted(text), re.IGNORECASE):
        return None  # "I tell you…": the player addresses someone; not ours to retell
    return body[:1].upper() + body[1:]


def deed_phrase(action: str) -> str | None:
    """The deed itself as a verb phrase ("climb the sea wall" for "I try to climb the sea
    wall and roll for it"), or None (see :func:`you_form`). Of several sentences, the
    deed is the first the player leads, else the last ("Three cutthroats jump me. I cut
    them down": "cut them down"; the whole once read "You set yourself to three
    cutthroats jump you...")."""
    action = _players_sentence(action)
    sentence = you_form(action)
    if sentence is not None and not sentence.lower().startswith("you ") \
            and (own := _split_fronted(" ".join(action.split()))) is not None:
        sentence = you_form(own)  # "When the guard turns, I slip past": the deed is after
    if sentence is None or not sentence.lower().startswith("you "):
        return None
    phrase = _ROLL_TAIL.sub("", sentence[4:]).strip(" ,;")
    for _ in range(3):  # "try to carefully climb": peel each prefix
        stripped = _ATTEMPT.sub("", phrase, count=1)
        if stripped == phrase:
            break
        phrase = stripped
    if not phrase or not _WORD.match(phrase) or re.match(r"(?i)(?:roll|let)\b", phrase) \
            or re.fullmatch(r"(?i)(?:make|do) (?:a |an )?[a-z]+ (?:check|save|saving throw)", phrase):
        return None
    if len(phrase) > MAX_PHRASE:
        phrase = phrase[:MAX_PHRASE].rsplit(" ", 1)[0]
    return phrase


def _players_sentence(action: str) -> str:
    parts = [p for p in _SENTENCE_END.split(" ".join(action.split())) if p]
    if len(parts) < 2:
        return action
    # else the last: what is put first sets the scene ("The wardens come. Run for the quay")
    return next((p for p in parts if (w := _WORD.match(p)) and w.group(0).lower() in _OPENERS),
                parts[-1])


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Za-z])")


def _swap(text: str) -> str:
    """First person -> second person outside double quotes; "I am/was" agree."""
    parts = re.split(r"([\"“”][^\"“”]*[\"“”]?)", text)
    out = []
    for part in parts:
        if part[:1] in "\"“”":
            out.append(part)
            continue
        part = re.sub(r"\b[Ii]\s+am\b", "you are", part)
        part = re.sub(r"\b[Ii]\s+was\b", "you were", part)
        part = _WORD.sub(lambda m: _swapped(m.group(0)), part)
        out.append(part)
    return "".join(out)


def _swapped(word: str) -> str:
    # A player who types all in lower case writes "i" for I: the pronoun all the same.
    if word == "US":  # a country, not the party
        return word
    return _SWAP.get(word.lower(), word)


def _unquoted(text: str) -> str:
    return re.sub(r"[\"“][^\"“”]*[\"”]?", " ", text)


# -- plot beats --------------------------------------------------------------------------

# Verbs a beat's description puts after "the player" ("the player meets…"); a coordinated
# verb is de-conjugated only when it is one of these ("…and learns where…").
_BEAT_VERBS = frozenset("""
meet learn find see hear reach enter leave take bring carry give lose keep open close
cross climb follow watch notice discover realise realize return arrive stand wake face
choose decide receive earn win read speak ask tell promise agree refuse owe pay sign
""".split())
_IRREGULAR = {"has": "have", "is": "are", "was": "were", "does": "do", "goes": "go"}


def _base(verb: str) -> str:
    lower = verb.lower()
    if lower in _IRREGULAR:
        return _IRREGULAR[lower]
    if lower.endswith("ies") and len(lower) > 4:
        return lower[:-3] + "y"
    if lower.endswith(("ches", "shes", "sses", "xes", "zes", "oes")):
        return lower[:-2]
    if lower.endswith("s") and not lower.endswith("ss"):
        return lower[:-1]
    return lower


def beat_sentence(description: str) -> str | None:
    """A beat's ``description`` as story prose in the second person (first sentence,
    at most :data:`MAX_PHRASE` characters), or None (module doc)."""
    text = " ".join(description.split())
    if not text:
        return None
    text = first_sentence(text)
    text = text if ends_sentence(text) else text + "."
    if len(text) > MAX_PHRASE * 2 or re.search(r"\bplayer[- ]characters?\b", text, re.IGNORECASE):
        return None  # "the player characters": a party, not the one "you"
    text = re.sub(r"\b([Tt])he player['’]s\b", lambda m: "Your" if m.group(1) == "T" else "your",
                  text)

    def subject(m: re.Match[str]) -> str:
        you = "You" if m.group(1) == "T" else "you"
        verb = _base(m.group(2))
        rest = m.group(3)
        # "…and learns where": a second verb of the same subject, before the clause ends.
        rest = re.sub(r"^([^,;.]*?\band\s+)([a-z]+s)\b",
                      lambda r: r.group(1) + (_base(r.group(2)) if _base(r.group(2)) in _BEAT_VERBS
                                              else r.group(2)), rest)
        return f"{you} {verb}{rest}"

    text = re.sub(r"\b([Tt])he player\s+([a-z]+s)\b([^.!?]*)", subject, text)
    text = re.sub(r"\b([Tt])he player\b", lambda m: "You" if m.group(1) == "T" else "you", text)
    if re.search(r"\bplayers?\b", text, re.IGNORECASE):
        return None
    return text[:1].upper() + text[1:]


__all__ = ["beat_sentence", "deed_phrase", "opens_clause", "you_form"]
