"""Simulated answers for memory extraction and consolidation, built from the dialogue text.

Extraction reads only the user turns: a sentence that, lead-ins and asides to the
assistant cut, speaks of the user in the first person and is no question, instruction or
small talk becomes at most one fact, the whole statement without its subject
(:func:`~memoryquest.simulator.grammar.as_fact`), typed by cue and citing the sentence's id. Facts within ``UPDATE_JACCARD`` of a known one update it. Consolidation
keeps ONE member's statement (the most informative), never a concatenation.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Set
from functools import cache
from typing import Any

from memoryquest.memory.consolidation_contracts import ConsolidationInputs
from memoryquest.memory.extraction_contracts import ExtractionInputs
from memoryquest.simulator import simulates
from memoryquest.simulator.grammar import (
    FIRST_PERSON,
    as_fact,
    calendar_words,
    lower_first,
    number_words,
    upper_first,
)
from memoryquest.simulator.needs import classify_need, infer_domains
from memoryquest.simulator.needs.bridges import core_of
from memoryquest.simulator.schema import MemoryTable
from memoryquest.simulator.tables import load
from memoryquest.text import STOPWORDS, content_stems, split_sentences

UPDATE_JACCARD = 0.6
MIN_WORDS = 3
MAX_ENTITIES = 5
MAX_UPDATED_ENTITIES = 6
MAX_MERGED_ENTITIES = 8
MAX_TOPICS = 2

_FIRST = r"(?:I|I'm|I've|I'd|I'll|My)"


def _table() -> MemoryTable:
    return load(MemoryTable)


def _openers(words: tuple[str, ...], tail: str = "") -> re.Pattern[str]:
    """A sentence opening on one of ``words`` (pattern pieces), followed by ``tail``."""
    return re.compile(rf"^(?:{'|'.join(words)}){tail}", re.IGNORECASE)


@cache
def _lexicon() -> dict[str, re.Pattern[str]]:
    """The openings a statement is read by: lead-ins to drop, then what is no statement."""
    table = _table()
    return {
        # Discourse markers that open a sentence without punctuation ("Also I ...", "By the way my ...").
        "marker": _openers(table.discourse_markers, r"\b[,!.:]?\s*(?:[—–-]+\s*)?"),
        # Interjections, only when punctuation closes them ("Oh, ...", "No — ...", "Thanks!").
        "interjection": _openers(table.interjections, r"\s*(?:[,!.:]+|\s[—–-]+)\s*"),
        "imperative": _openers(table.imperatives, r"\b"),
        "small_talk": _openers(table.small_talk),
        "request": _openers(table.request_openers),
    }


# "Since you asked, ...", "As you may remember, ..." — a lead-in about the assistant.
_YOU_LEAD = re.compile(r"^[^,]{0,40}\byou\b[^,]{0,30},\s+(?=\S)", re.IGNORECASE)
# "Oh, one more thing —", "Quick context:" — a short lead-in closed by a dash or a colon.
_DASH_LEAD = re.compile(r"^(?P<lead>[^—–:;]{1,40}?)\s*(?:[—–]|\s-\s|:)\s+(?P<rest>\S.*)$")
_SUBJECT = re.compile(rf"^{_FIRST}\b")
_LEAD_IN = re.compile(rf"^(?P<lead>[^,]{{2,48}}),\s+(?P<clause>{_FIRST}\b.*)$")
# "I'm done" in "9:15 AM is fine, set it and I'm done" closes a request; it says nothing of the user.
_SIGN_OFF = re.compile(r"\bI'm (?:all )?(?:done|set|good)\b", re.IGNORECASE)
_TRAILING_REQUEST = re.compile(
    r"(?:,|;|\s+-+|\s+[—–])\s*(?:so\s+|and\s+|but\s+)?(?:can|could|would|will)\s+you\b.*$"
    r"|(?:,|;|\s+-+|\s+[—–])\s*(?:so\s+|and\s+)?(?:please|any (?:ideas|suggestions|recommendations|tips))\b.*$"
    r"|,\s*(?:as you (?:know|said|suggested)|you know|if you can|if possible|thanks|thank you)[.!]?$",
    re.IGNORECASE,
)
# A clause that turns to the assistant: ", so keep that in mind", ", in case you plan ...".
_ASIDE = re.compile(
    r"(?:,|;|\s+[—–-]+)\s*(?:so|and|but|which|in case|if|when|just)?\b[^,;—–]*\b(?:you|your|yours)\b.*$",
    re.IGNORECASE,
)
_ADDRESSES_ASSISTANT = re.compile(r"\b(?:you|your|yours)\b", re.IGNORECASE)

# Entities: runs of capitalised tokens (with a few lower-case joiners inside a name).
_TOKEN = re.compile(r"[A-Za-z0-9][\w'&.+/-]*|&")
_BREAK = re.compile(r"\s*([,;:()\u2014\u2013]|\s-\s)")


def jaccard(a: Set[str], b: Set[str]) -> float:
    if not a or not b:
        return 0.0
    shared = len(a & b)
    return shared / (len(a) + len(b) - shared)  # |a ∪ b| without building the union


def _lead_as_tail(lead: str) -> str:
    """'Last spring' -> ' last spring'; names of days and months keep their capital."""
    first = lead.split()[0]
    keep = first.lower() in calendar_words() or (
        len(first) > 1 and (first.isupper() or first[1:] != first[1:].lower())
    )
    return " " + (lead if keep else lower_first(lead))


def _strip_lead_ins(text: str) -> str:
    previous, lexicon = None, _lexicon()
    while text and text != previous:
        previous = text
        text = lexicon["interjection"].sub("", text, count=1)
        text = lexicon["marker"].sub("", text, count=1).lstrip(" ,—–-")
        text = _YOU_LEAD.sub("", text, count=1)
        dash = _DASH_LEAD.match(text)
        if (
            dash is not None
            and not FIRST_PERSON.search(dash.group("lead"))
            and len(dash.group("lead").split()) <= 6
        ):
            text = dash.group("rest")
    return text


def statement(sentence: str) -> str | None:
    """The first-person statement one sentence makes about the user, cleaned; None when it makes none."""
    text = " ".join(sentence.replace("\u2019", "'").split())
    text = _strip_lead_ins(text)
    text = _TRAILING_REQUEST.sub("", text)
    if not text or text.endswith("?"):
        return None
    text = text.rstrip(" .!;:,—–-")
    if _ADDRESSES_ASSISTANT.search(text):
        text = _ASIDE.sub("", text).rstrip(" .!;:,—–-")
        if _ADDRESSES_ASSISTANT.search(text):
            return None
    tail = ""
    if not _SUBJECT.match(text):
        lead_in = _LEAD_IN.match(text)
        if lead_in is not None and not FIRST_PERSON.search(lead_in.group("lead")):
            tail = _lead_as_tail(lead_in.group("lead"))
            text = lead_in.group("clause")
        elif not FIRST_PERSON.search(_SIGN_OFF.sub("", text)) or _lexicon()["imperative"].match(
            text
        ):
            return None
    text = "My" + text[2:] if text.startswith("my ") else upper_first(text)
    if _lexicon()["small_talk"].match(text) or len(text.split()) < MIN_WORDS:
        return None
    return text + tail


def statements(text: str) -> list[str]:
    """The first-person statements of one user turn, one per sentence, in order."""
    return [s for s in (statement(raw) for raw in split_sentences(text)) if s]


def classify(clause: str) -> str:
    """The fact type of a first-person clause, by the first matching cue family."""
    return next((t.type for t in _table().fact_types if t.pattern.search(clause)), "Activity")


def _clean_entity(value: str) -> str:
    return re.sub(r"'s$", "", value.strip(" .,;:'\"()"))


def proper_names(text: str) -> list[str]:
    """Runs of capitalised words inside ``text`` (not its first word): names, places, brands."""
    # Each token with the punctuation right after it, if any: a list's items ("Tale, Beloved")
    # and a name before a clause break are separate names, and once a comma has closed a name,
    # "and" ends the list's last item instead of joining two ("Beloved and Matilda").
    tokens = [
        (m.group(0), after.group(1) if (after := _BREAK.match(text, m.end())) else "")
        for m in _TOKEN.finditer(text)
    ]
    names: list[str] = []
    run: list[str] = []
    listing = False

    never = _table().not_entities | calendar_words()

    def close() -> None:
        while run and run[-1].lower() in _table().name_joiners:
            run.pop()
        if run and (name := _clean_entity(" ".join(run))) and name.lower() not in never:
            names.append(name)
        run.clear()

    for position, (token, mark) in enumerate(tokens):
        bare = token.rstrip(".,'")
        lower = bare.lower()
        capital = bare[:1].isupper() or (bare[:1].isdigit() and bool(run))
        if position == 0 or lower in never:
            close()
            continue
        if capital:
            run.append(bare)
        elif run and lower in _table().name_joiners and not (listing and lower == "and"):
            run.append(lower)
        else:
            close()
            listing = listing and lower == "and"
        if mark or token.endswith("."):
            listing = mark == "," and bool(run)
            close()
    close()
    return names


@cache
def _determiners() -> frozenset[str]:
    """Words that open a noun phrase: the phrase's last word before a break is its head noun."""
    numbers = number_words()[1:11]
    return frozenset(
        {"a", "an", "the", "my", "his", "her", "their", "our", "your", "some", "any", "no"}
        | {"another", "this", "these", "those", "new", *numbers}
    )


_PHRASE_WORD = re.compile(r"[a-z][a-z-]*[a-z]|[a-z]")


def _topics(clause: str) -> list[str]:
    """A couple of head nouns of noun phrases a determiner opens ("a bad reaction" -> "reaction"), so
    verbs and adjectives standing alone never become topics."""
    tokens = re.findall(r"[A-Za-z0-9][\w'+/-]*|[^\sA-Za-z0-9]", clause)
    heads: list[str] = []
    index = 0
    while index < len(tokens):
        if tokens[index].lower() not in _determiners() and not tokens[index].isdigit():
            index += 1
            continue
        index += 1
        phrase: list[str] = []
        while index < len(tokens) and _PHRASE_WORD.fullmatch(tokens[index]):
            word = tokens[index]
            if word in STOPWORDS or word in _determiners() or word in _table().phrase_breaks:
                break
            if phrase and word.endswith(("ly", "ed")):
                break
            phrase.append(word)
            index += 1
        if phrase:
            heads.append(phrase[-1])
    candidates = [
        w for w in heads if len(w) >= 4 and w not in _table().not_topics and not w.endswith("ly")
    ]
    unique = list(dict.fromkeys(candidates))
    return sorted(unique, key=lambda w: (-len(w), unique.index(w)))[:MAX_TOPICS]


def entities(clause: str, domain: str) -> list[str]:
    """Names, the domain its own words point to and a topic noun or two, from the statement's core.

    The conversation's domain only for a statement that is no personal constraint: news told in passing
    is not filed under the chat.
    """
    core = core_of(clause)
    found: list[str] = []
    seen: set[str] = set()

    def keep(value: str) -> None:
        value = _clean_entity(value)
        if value and value.lower() not in _table().not_entities and value.lower() not in seen:
            seen.add(value.lower())
            found.append(value)

    for name in proper_names(core):
        keep(name)
    about = infer_domains(core, limit=1)
    if about:
        keep(about[0].value.lower())
    elif domain and classify_need(core) is None:
        keep(domain.lower())
    for word in _topics(core):
        if not any(word in entity.lower() for entity in found):
            keep(word)
    return found[:MAX_ENTITIES]


def clean_entities(values: list[str], limit: int) -> list[str]:
    """Entities from any source, without pronoun fragments or duplicates."""
    kept: list[str] = []
    seen: set[str] = set()
    for value in values:
        text = _clean_entity(" ".join(str(value).split()))
        words_ = text.split()
        while words_ and words_[-1].lower() in _table().not_entities:
            words_.pop()
        while words_ and words_[0].lower() in _table().not_entities:
            words_.pop(0)
        text = " ".join(words_)
        if text and text.lower() not in seen and text.lower() not in calendar_words():
            seen.add(text.lower())
            kept.append(text)
    return kept[:limit]


class _Draft:
    def __init__(self, fid: str, info: str, fact_type: str, related: list[str]) -> None:
        self.fid = fid
        self.info = info
        self.type = fact_type
        self.related = clean_entities(list(related), MAX_UPDATED_ENTITIES)
        self.tokens: Set[str] = content_stems(info)
        self.sentences: list[int] = []

    def absorb(self, info: str, related: list[str], sentence: int) -> None:
        tokens = content_stems(info)
        if not tokens <= self.tokens:
            self.info = info
            self.tokens = self.tokens | tokens
        self.related = clean_entities(self.related + related, MAX_UPDATED_ENTITIES)
        self.cite(sentence)

    def cite(self, sentence: int) -> None:
        if sentence not in self.sentences:
            self.sentences.append(sentence)

    def as_answer(self) -> dict[str, Any]:
        return {
            "fid": self.fid,
            "info": self.info,
            "type": self.type,
            "related_entities": self.related,
            "sentences": self.sentences,
        }


def _best_match(tokens: Set[str], drafts: list[_Draft]) -> _Draft | None:
    best: _Draft | None = None
    best_score = UPDATE_JACCARD
    for draft in drafts:
        score = jaccard(tokens, draft.tokens)
        if score >= best_score and (best is None or score > best_score):
            best, best_score = draft, score
    return best


def is_request(sentence: str) -> bool:
    """Is this the sentence a conversation opens with to ask for help ("Hi, could you help me ...?")?"""
    opening = _strip_lead_ins(" ".join(sentence.replace("\u2019", "'").split()))
    return bool(_lexicon()["request"].match(opening))


def facts_of_turn(
    content: str, domain: str, *, opening: bool = False
) -> list[tuple[str, str, str, list[str]]]:
    """(sentence, info, type, entities) for every statement sentence of one user turn.

    In the conversation's ``opening`` turn the request itself is not a fact about the user.
    """
    return [
        fact[1:] for fact in facts_of_sentences(split_sentences(content), domain, opening=opening)
    ]


def facts_of_sentences(
    sentences: list[str], domain: str, *, opening: bool = False
) -> list[tuple[int, str, str, str, list[str]]]:
    """(position, sentence, info, type, entities) for every statement among a user turn's sentences."""
    out = []
    for position, raw in enumerate(sentences):
        if opening and position == 0 and is_request(raw):
            continue
        clause = statement(raw)
        if clause is None:
            continue
        info = as_fact(clause).replace(";", ",")  # one statement, never clauses joined by ";"
        out.append((position, raw, info, classify(clause), entities(clause, domain)))
    return out


@simulates(ExtractionInputs)
def extract_facts(inputs: ExtractionInputs, rng: random.Random) -> dict[str, Any]:
    existing = [
        _Draft(f["fid"], f["info"], f["type"], list(f.get("related_entities", [])))
        for f in inputs.existing_facts
    ]
    updates: dict[str, _Draft] = {}
    new: list[_Draft] = []
    for session in inputs.sessions:
        domain = str(session.get("domain", ""))
        user_turns = [t for t in session.get("turns", []) if t.get("role") == "user"]
        for position, turn in enumerate(user_turns):
            numbered = list(turn.get("sentences", {}).items())
            for at, _, info, fact_type, related in facts_of_sentences(
                [text for _, text in numbered], domain, opening=position == 0
            ):
                sentence = int(numbered[at][0])
                tokens = content_stems(info)
                if not tokens:
                    continue
                match = _best_match(tokens, existing)
                if match is not None:
                    draft = updates.get(match.fid)
                    if draft is None:
                        draft = _Draft(match.fid, match.info, match.type, match.related)
                        updates[match.fid] = draft
                    draft.absorb(info, related, sentence)
                    continue
                same = _best_match(tokens, new)
                if same is not None:
                    same.absorb(info, related, sentence)
                    continue
                draft = _Draft(f"NEW_{len(new) + 1}", info, fact_type, related)
                draft.cite(sentence)
                new.append(draft)
    ordered_updates = [updates[d.fid] for d in existing if d.fid in updates]
    return {"facts": [d.as_answer() for d in [*ordered_updates, *new]]}


def _atomic(info: str) -> str:
    """One statement: the most informative clause of a text an older merge may have joined with ';'."""
    pieces = [p.strip().rstrip(" .") for p in str(info).split(";") if p.strip()]
    if not pieces:
        return str(info).strip()
    best = max(pieces, key=lambda p: (len(content_stems(p)), -pieces.index(p)))
    return upper_first(best)


@simulates(ConsolidationInputs)
def merge_facts(inputs: ConsolidationInputs, rng: random.Random) -> dict[str, Any]:
    facts = list(inputs.facts)
    if not facts:
        raise ValueError("memory_consolidation needs at least one fact to merge")
    infos = [_atomic(f["info"]) for f in facts]
    tokens = [content_stems(info) for info in infos]
    # The most informative member; among equals the most recent, then the first listed.
    main = max(
        range(len(facts)), key=lambda i: (len(tokens[i]), str(facts[i].get("updated_on", "")), -i)
    )
    counts = Counter(str(f["type"]) for f in facts)
    top = max(counts.values())
    main_type = str(facts[main]["type"])
    fact_type = (
        main_type
        if counts[main_type] == top
        else next(str(f["type"]) for f in facts if counts[str(f["type"])] == top)
    )
    related: list[str] = []
    for fact in [facts[main], *facts]:
        related.extend(str(e) for e in fact.get("related_entities", []))
    return {
        "info": infos[main],
        "type": fact_type,
        "frequency": sum(int(f["frequency"]) for f in facts),
        "related_entities": clean_entities(related, MAX_MERGED_ENTITIES),
    }
