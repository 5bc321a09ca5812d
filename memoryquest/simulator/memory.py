"""Simulated answers for memory extraction and consolidation, built from the dialogue text.

Extraction (``memory_extraction``) reads only the USER turns of the sessions it is
given and the existing facts:

* Statements. A turn is split into sentences; leading discourse markers ("By the
  way,", "Also,", "Oh, and ...") are dropped; a sentence is a statement when it
  then starts with a first-person subject (I, I'm, I've, I'd, I'll, My), or with a
  short non-first-person lead-in phrase followed by a comma and such a subject
  ("Last spring, I moved to Toronto" -> the lead-in moves to the end), or when it
  has a first-person word anywhere ("Sunday mornings I play in a hockey league"
  is kept whole and only its pronouns change) unless it is an imperative
  ("Please set my alarm", "Book me a table"). A trailing
  request or aside is cut off ("..., so can you find ...?", "..., as you know").
  Compound sentences split before a new first-person clause (", and I ...",
  ", so I ...", " but I'm ..."). Questions, requests aimed at
  the assistant (any statement mentioning "you"/"your"), hedges and small talk
  ("I see", "I think that works", "I'm not sure", ...) and statements under three
  words are skipped.
* Third person. The subject is dropped and the verb conjugated ("I moved ..." ->
  "Moved ...", "I love ..." -> "Loves ...", "I'm ..." -> "Is ...", "I've been
  ..." -> "Has been ...", "I'd like to ..." -> "Would like to ..."); a leading
  "My X" becomes "User's X", "My X and I" becomes "User and their X", "A friend
  and I" becomes "User and a friend"; other first-person words become
  they/their/them.
* Type, by the first matching cue family, in this order: Event (injury, surgery,
  moved, lost my, got married, promotion, new job, laid off, allergy, ...),
  Preference (I love/like/prefer/enjoy/hate..., favourite, rather), Interest
  (interested in, fan of, passionate about, I'm into, ...), Goal (going to, plan,
  will, want to, would like to, hope to, next week, ...), Identity (I'm a, work
  as, years old, live in, my sister/wife/..., degree, full-time, ...), else Activity.
* Related entities: capitalised spans after the first word (names, places,
  brands), the session's domain, then the longest content words until there
  are four; at most five.
* Evidence: the session id and index of the turn the statement came from.
* Upsert. Facts are compared by token Jaccard over content-word stems; a
  statement at Jaccard >= ``UPDATE_JACCARD`` (0.6) to an existing fact updates
  that fid (frequency + 1, info replaced by the newer wording when it adds
  words, entities united up to six, evidence of every matching turn); one at >= 0.6 to a
  statement already taken from this batch joins it as more evidence; anything
  else is a new fact ``NEW_<n>``.

Consolidation (``memory_consolidation``): the info is the most informative member
(most content words) followed by every other member clause (earlier merges are
split at "; ") that adds words, at most four clauses joined by "; "; the type is the most common one (ties: the most informative member's);
entities are the ordered, case-insensitive union (at most eight); frequency is
the sum.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Set
from functools import lru_cache
from typing import Any

from memoryquest.simulator import simulates

UPDATE_JACCARD = 0.6
MIN_WORDS = 3
MAX_ENTITIES = 5
MAX_UPDATED_ENTITIES = 6
MAX_MERGED_ENTITIES = 8
MAX_MERGED_PARTS = 4

_SENTENCE_END = re.compile(r"[.!?]+\s+|\n+")
_ABBREVIATIONS = frozenset(
    ["inc", "corp", "co", "ltd", "dr", "mr", "mrs", "ms", "st", "jr", "sr", "vs", "etc", "e.g", "i.e", "u.s", "u.k", "approx", "dept", "mt", "ft", "ave"]
)
_MARKER = re.compile(
    r"^(?:oh|well|also|actually|by the way|btw|anyway|honestly|just so you know|fyi|for context|"
    r"for what it's worth|and|but|so|plus|incidentally|as i mentioned|as i said|as you know|yeah|yes|"
    r"no|sure|okay|ok|hmm|hi|hey|hello|great|perfect|thanks|thank you|one more thing|oh and|side note|"
    r"in fact|funny enough|to be honest|truth be told)\b[,!.:]?\s+",
    re.IGNORECASE,
)
_SUBJECT = re.compile(r"^(?:I|I'm|I've|I'd|I'll|My)\b")
_LEAD_IN = re.compile(r"^(?P<lead>[^,]{2,48}),\s+(?P<clause>(?:I|I'm|I've|I'd|I'll|My)\b.*)$")
_I_WORD = re.compile(r"\b(?:I|I'm|I've|I'd|I'll)\b")
_IMPERATIVE = re.compile(
    r"^(?:please|set|book|find|show|tell|give|help|remind|add|check|send|make|get|play|search|look|"
    r"suggest|recommend|schedule|cancel|change|update|let|list|compare|reserve|order|buy|plan|text|"
    r"call|message|email|draft|write|put|move|turn|keep|note|remember|save|track|sort|pick|choose)\b",
    re.IGNORECASE,
)
_FIRST_PERSON_WORD = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|myself)\b", re.IGNORECASE)
_TRAILING_REQUEST = re.compile(
    r"(?:,|;|\s+-+|\s+—)\s*(?:so\s+|and\s+|but\s+)?(?:can|could|would|will)\s+you\b.*$"
    r"|(?:,|;|\s+-+|\s+—)\s*(?:so\s+|and\s+)?(?:please|any (?:ideas|suggestions|recommendations|tips))\b.*$"
    r"|,\s*(?:as you (?:know|said|suggested)|you know|if you can|if possible|thanks|thank you)[.!]?$",
    re.IGNORECASE,
)
_SKIP = re.compile(
    r"^(?:I (?:need|want) you|I'd like you|I would like you|I was wondering|I wonder|I'm wondering|"
    r"I'd appreciate|I would appreciate|I appreciate|I think (?:that|this|it|so)|I see\b|I guess|I agree|"
    r"I understand|I'm not sure|I am not sure|I don't know|I do not know|I hope (?:that|this|it)|"
    r"I'll (?:take|go with|check|think|look|try|keep|do that)|I'm (?:glad|happy|excited) (?:to hear|that|about that|with that)|"
    r"I (?:love|like) (?:that|this|it|those|these|the sound)\b|I'm (?:all )?set\b|I'm good\b|I'm done\b|"
    r"That's it|I have a question|I have another question|I'm curious (?:if|whether|what|how)|"
    r"I could use (?:some |a little )?(?:help|assistance)|I need (?:some |a little )?(?:help|assistance)\b|"
    r"(?:that|this|it)(?:'s| is| was| works| sounds)\b|sounds\b|works for\b|perfect\b|great\b)",
    re.IGNORECASE,
)
_ADDRESSES_ASSISTANT = re.compile(r"\b(?:you|your|yours)\b", re.IGNORECASE)

_STOPWORDS = frozenset(
    ["a", "an", "the", "and", "or", "but", "so", "of", "to", "in", "on", "at", "for", "with", "from", "by", "about", "as", "into", "over", "after", "before", "than", "then", "is", "are", "was", "were", "be", "been", "being", "am", "has", "have", "had", "do", "does", "did", "will", "would", "can", "could", "should", "may", "might", "must", "i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "myself", "user", "user's", "they", "their", "them", "theirs", "themselves", "it", "its", "this", "that", "these", "those", "there", "here", "very", "really", "just", "also", "too", "quite", "some", "any", "all", "more", "most", "much", "many", "such", "own", "not", "no", "nor", "only", "out", "up", "down", "off", "again", "further", "once", "what", "which", "who", "whom", "when", "where", "why", "how"]
)

_IRREGULAR_PAST = frozenset(
    ["went", "got", "took", "bought", "saw", "had", "was", "were", "made", "ran", "began", "left", "met", "lost", "found", "came", "became", "flew", "drove", "wrote", "spent", "sold", "won", "broke", "fell", "felt", "kept", "paid", "quit", "told", "thought", "wore", "gave", "sent", "built", "brought", "caught", "chose", "did", "drank", "ate", "forgot", "grew", "heard", "hit", "hurt", "knew", "led", "lent", "let", "meant", "rode", "rang", "rose", "sang", "sat", "slept", "spoke", "stood", "stole", "swam", "taught", "tore", "understood", "woke", "threw"]
)
_MODALS = frozenset(["can", "could", "should", "must", "might", "may", "shall", "would", "will"])
_ADVERBS = frozenset(
    ["usually", "always", "often", "really", "also", "just", "still", "recently", "finally", "never", "sometimes", "mostly", "generally", "absolutely", "definitely", "typically", "only", "actually", "even", "already", "mainly", "normally", "rarely", "occasionally", "frequently", "regularly", "especially", "currently", "truly", "totally"]
)
_STARTS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), replacement)
    for pattern, replacement in (
        (r"^I'm not\b", "Is not"),
        (r"^I am not\b", "Is not"),
        (r"^I'm\b", "Is"),
        (r"^I am\b", "Is"),
        (r"^I was\b", "Was"),
        (r"^I wasn't\b", "Was not"),
        (r"^I've been\b", "Has been"),
        (r"^I have been\b", "Has been"),
        (r"^I've\b", "Has"),
        (r"^I have\b", "Has"),
        (r"^I haven't\b", "Has not"),
        (r"^I had\b", "Had"),
        (r"^I'd\b", "Would"),
        (r"^I'll\b", "Will"),
        (r"^I won't\b", "Will not"),
        (r"^I don't\b", "Does not"),
        (r"^I do not\b", "Does not"),
        (r"^I didn't\b", "Did not"),
        (r"^I did not\b", "Did not"),
        (r"^I can't\b", "Cannot"),
        (r"^I cannot\b", "Cannot"),
        (r"^I do\b", "Does"),
    )
)
_LATER_FIRST_PERSON: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (r"\bI'm\b", "they're"),
        (r"\bI've\b", "they've"),
        (r"\bI'd\b", "they'd"),
        (r"\bI'll\b", "they'll"),
        (r"\bI am\b", "they are"),
        (r"\bI was\b", "they were"),
        (r"\bI\b", "they"),
        (r"\b[Mm]yself\b", "themselves"),
        (r"\b[Mm]ine\b", "theirs"),
        (r"\b[Mm]y\b", "their"),
        (r"\b[Mm]e\b", "them"),
    )
)

_EVENT = re.compile(
    r"\b(?:injur\w*|broke (?:my|a|an)|broken|sprain\w*|surgery|operation|diagnos\w*|hospital\w*|sick|illness|"
    r"pregnan\w*|new baby|had a baby|moved|moving|relocat\w*|lost (?:my|a|an|the|our)|laid off|got fired|"
    r"got married|getting married|engaged|divorc\w*|promot\w*|new job|retir\w*|passed away|accident|"
    r"allerg\w*|graduat\w*|bought a (?:house|home|car|new)|got a raise|pay cut|tight budget|budget is tight|"
    r"broke up|recover\w*|quit my|started a new|anniversary|birthday|wedding)\b",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\bI (?:\w+ly |really |always |never |also |still |just )*(?:love|like|prefer|enjoy|hate|dislike|adore|"
    r"can't stand|cannot stand|avoid|tend to)\b|\b(?:favou?rite|prefer\w*|rather|go-to)\b",
    re.IGNORECASE,
)
_INTEREST = re.compile(
    r"\b(?:interested in|interest in|fan of|passionate about|curious about|fascinated|keen on|hobby|hobbies|"
    r"I'm (?:really |very )?into|I am (?:really |very )?into|follow(?:ing)? (?:the|all))\b",
    re.IGNORECASE,
)
_GOAL = re.compile(
    r"\b(?:going to|gonna|plan\w*|will|I'll|want to|wanna|I'd like to|would like to|hope to|hoping to|"
    r"intend\w*|aim\w* to|looking to|looking for|thinking (?:of|about)|saving (?:up )?for|need to|have to|"
    r"upcoming|trying to|about to|goal|next (?:week|month|year|weekend|summer|winter|spring|fall|autumn|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|time))\b",
    re.IGNORECASE,
)
_IDENTITY = re.compile(
    r"\b(?:I'm an?|I am an?|work(?:ing)? as|work(?:ing)? (?:at|for)|job as|profession|years old|"
    r"my (?:wife|husband|partner|sister|brother|son|daughter|kids|children|mom|mother|dad|father|parents|"
    r"family|girlfriend|boyfriend|fianc\w*|name)|I live|live in|living in|I'm from|I am from|born in|"
    r"grew up|degree|studied|single|never been married|native|I speak|based in|full-time|part-time|"
    r"self-employed|freelanc\w*|unemployed|student)\b",
    re.IGNORECASE,
)
_CAPITALISED = re.compile(r"[A-Z][\w'&.+-]*(?:\s+(?:of\s+|the\s+|de\s+|du\s+|la\s+|van\s+|von\s+)?[A-Z0-9][\w'&.+-]*)*")
_CLAUSE_BREAK = re.compile(r"(?:,|;)\s+(?:and|but|so|while|because)?\s*(?=(?:I|I'm|I've|I'd|I'll|my)\b)|\s+(?:and|but)\s+(?=(?:I'm|I've|I'd|I'll)\b)")
_NOT_KEYWORDS = frozenset(
    ["prefer", "prefers", "preferred", "favourite", "favorite", "love", "loves", "like", "likes", "enjoy", "enjoys", "hate", "hates", "going", "usually", "always", "never", "really", "often", "recently", "would", "should", "could"]
)
_NOT_ENTITIES = frozenset({"I", "I'm", "I've", "I'd", "I'll", "User's", "AM", "PM", "User"})


# --------------------------------------------------------------------------- text helpers


def _stem(token: str) -> str:
    token = token.removesuffix("'s")
    if len(token) > 4 and token.endswith("ies"):
        return token[:-3] + "y"
    if len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
        return token[:-1]
    return token


def content_tokens(text: str) -> set[str]:
    """Lower-cased content-word stems: what two facts must share to be the same fact."""
    return set(_content_tokens(text))


_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


@lru_cache(maxsize=65536)
def _content_tokens(text: str) -> frozenset[str]:
    """Memoised: every extraction call re-reads all existing facts of the persona."""
    words = _WORD.findall(text.lower().replace("’", "'"))
    return frozenset(_stem(w) for w in words if w not in _STOPWORDS)


def jaccard(a: Set[str], b: Set[str]) -> float:
    if not a or not b:
        return 0.0
    shared = len(a & b)
    return shared / (len(a) + len(b) - shared)  # |a ∪ b| without building the union


def _third_singular(verb: str) -> str:
    lower = verb.lower()
    special = {"have": "has", "do": "does", "go": "goes", "be": "is"}
    if lower in special:
        return special[lower]
    if lower in _MODALS or lower in _IRREGULAR_PAST or (lower.endswith("ed") and not lower.endswith("eed")):
        return verb
    if lower.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


def _later_first_person(text: str) -> str:
    for pattern, replacement in _LATER_FIRST_PERSON:
        text = pattern.sub(replacement, text)
    return text


def third_person(clause: str) -> str:
    """'I moved to Toronto' -> 'Moved to Toronto'; 'My sister is a nurse' -> "User's sister is a nurse"."""
    couple = re.match(r"^My ([\w' -]{1,30}?) and I\b(.*)$", clause)
    if couple:
        return _capitalise(f"User and their {couple.group(1)}{_later_first_person(couple.group(2))}")
    if clause.startswith("My "):
        return "User's " + _later_first_person(clause[3:])
    companion = re.match(r"^([A-Z][\w' -]{0,30}?) and I\b(.*)$", clause)
    if companion and not _FIRST_PERSON_WORD.search(companion.group(1)):
        who = companion.group(1)
        who = who if who.split()[0].lower() in _KEEP_CASE or who[1:2].isupper() else who[:1].lower() + who[1:]
        return f"User and {who}{_later_first_person(companion.group(2))}"
    for pattern, replacement in _STARTS:
        if pattern.match(clause):
            return replacement + _later_first_person(pattern.sub("", clause, count=1))
    words = clause.split()
    if not words or words[0] != "I":
        return _capitalise(_later_first_person(clause))
    rest = words[1:]
    adverbs: list[str] = []
    while rest and rest[0].lower() in _ADVERBS:
        adverbs.append(rest.pop(0))
    if not rest:
        return _capitalise(_later_first_person(" ".join(adverbs)))
    verb = _third_singular(rest[0])
    return _capitalise(_later_first_person(" ".join([*adverbs, verb, *rest[1:]])))


_KEEP_CASE = frozenset(
    ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"]
)


def _lead_as_tail(lead: str) -> str:
    """'Last spring' -> ' last spring'; names of days and months keep their capital."""
    first = lead.split()[0]
    keep = first.lower() in _KEEP_CASE or (len(first) > 1 and (first.isupper() or first[1:] != first[1:].lower()))
    return " " + (lead if keep else lead[:1].lower() + lead[1:])


def _sentences(text: str) -> list[str]:
    """Split after . ! ? and line breaks, but not after abbreviations like 'Inc.' or 'e.g.'."""
    pieces: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        before = text[start : match.start()].split()
        last = before[-1].lower().rstrip(".") if before else ""
        if match.group(0).rstrip() == "." and last in _ABBREVIATIONS:
            continue
        pieces.append(text[start : match.end()])
        start = match.end()
    pieces.append(text[start:])
    return [p for p in pieces if p.strip()]


def statements(text: str) -> list[str]:
    """First-person declarative clauses of one user turn.

    A comma lead-in ("Last spring, I ...") moves to the end of its clause; a
    sentence with a first-person word elsewhere ("On Sundays I play ...",
    "Because of eye strain I only read ...") is kept whole.
    """
    found: list[str] = []
    for raw in _sentences(text.replace("’", "'").strip()):
        sentence = " ".join(raw.split())
        previous = None
        while sentence and sentence != previous:
            previous = sentence
            sentence = _MARKER.sub("", sentence, count=1)
        sentence = _TRAILING_REQUEST.sub("", sentence)
        if not sentence or sentence.endswith("?"):
            continue
        sentence = sentence.rstrip(" .!;:,")
        tail = ""
        whole = False
        if not _SUBJECT.match(sentence):
            lead_in = _LEAD_IN.match(sentence)
            if lead_in is not None and not _FIRST_PERSON_WORD.search(lead_in.group("lead")):
                tail = _lead_as_tail(lead_in.group("lead"))
                sentence = lead_in.group("clause")
            elif _FIRST_PERSON_WORD.search(sentence) and not _IMPERATIVE.match(sentence):
                whole = True
            else:
                continue
        parts = _CLAUSE_BREAK.split(sentence)
        for k, part in enumerate(parts):
            part = part.strip(" ,;")
            part = "My" + part[2:] if part.startswith("my ") else part
            if not _FIRST_PERSON_WORD.search(part) or _SKIP.match(part) or _ADDRESSES_ASSISTANT.search(part):
                continue
            if whole and k == 0 and len(parts) > 1 and not _I_WORD.search(part):
                continue  # a fragment split off before a new clause: "In addition to my love for ..."
            if len(part.split()) < MIN_WORDS:
                continue
            found.append(part + (tail if k == 0 else ""))
    return found


def classify(clause: str) -> str:
    """The fact type of a first-person clause, by the first matching cue family."""
    for name, pattern in (
        ("Event", _EVENT),
        ("Preference", _PREFERENCE),
        ("Interest", _INTEREST),
        ("Goal", _GOAL),
        ("Identity", _IDENTITY),
    ):
        if pattern.search(clause):
            return name
    return "Activity"


def entities(clause: str, domain: str) -> list[str]:
    found: list[str] = []
    seen: set[str] = set()

    def keep(value: str) -> None:
        value = value.strip(" .,'")
        if value and value not in _NOT_ENTITIES and value.lower() not in seen:
            seen.add(value.lower())
            found.append(value)

    words = clause.split(maxsplit=1)
    for match in _CAPITALISED.finditer(words[1] if len(words) > 1 else ""):
        keep(match.group(0))
    keep(domain.lower())
    if len(found) < 4:
        candidates = [
            w
            for w in re.findall(r"[A-Za-z][A-Za-z-]+", clause.split(maxsplit=2)[-1])
            if len(w) >= 5 and w.lower() not in _STOPWORDS | _NOT_KEYWORDS and not w.lower().endswith(("ly", "ed"))
        ]
        for word in sorted(dict.fromkeys(candidates), key=lambda w: (-len(w), candidates.index(w))):
            if len(found) >= 4:
                break
            if not any(word.lower() in entity.lower() for entity in found):
                keep(word.lower())
    return found[:MAX_ENTITIES]


# --------------------------------------------------------------------------- answers


class _Draft:
    def __init__(self, fid: str, info: str, fact_type: str, frequency: int, related: list[str], state: str) -> None:
        self.fid = fid
        self.info = info
        self.type = fact_type
        self.frequency = frequency
        self.related = list(related)
        self.state = state
        self.tokens: Set[str] = _content_tokens(info)
        self.evidence: dict[str, list[int]] = {}

    def absorb(self, info: str, related: list[str], session_id: str, turn: int) -> None:
        tokens = _content_tokens(info)
        if not tokens <= self.tokens:
            self.info = info
            self.tokens = self.tokens | tokens
        known = {r.lower() for r in self.related}
        self.related += [r for r in related if r.lower() not in known]
        self.related = self.related[:MAX_UPDATED_ENTITIES]
        self.cite(session_id, turn)

    def cite(self, session_id: str, turn: int) -> None:
        turns = self.evidence.setdefault(session_id, [])
        if turn not in turns:
            turns.append(turn)

    def as_answer(self) -> dict[str, Any]:
        return {
            "fid": self.fid,
            "info": self.info,
            "type": self.type,
            "frequency": self.frequency,
            "related_entities": self.related,
            "state": self.state,
            "evidence": [{"session_id": sid, "turn_indices": turns} for sid, turns in self.evidence.items()],
        }


def _best_match(tokens: Set[str], drafts: list[_Draft]) -> _Draft | None:
    best: _Draft | None = None
    best_score = UPDATE_JACCARD
    for draft in drafts:
        score = jaccard(tokens, draft.tokens)
        if score >= best_score and (best is None or score > best_score):
            best, best_score = draft, score
    return best


@simulates("memory_extraction")
def extract_facts(variables: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    existing = [
        _Draft(f["fid"], f["info"], f["type"], int(f["frequency"]), list(f.get("related_entities", [])), "update")
        for f in variables.get("existing_facts", [])
    ]
    updates: dict[str, _Draft] = {}
    new: list[_Draft] = []
    for session in variables.get("sessions", []):
        session_id = session["session_id"]
        domain = str(session.get("domain", ""))
        for turn in session.get("turns", []):
            if turn.get("role") != "user":
                continue
            for clause in statements(str(turn.get("content", ""))):
                info = third_person(clause)
                tokens = _content_tokens(info)
                if not tokens:
                    continue
                related = entities(clause, domain)
                match = _best_match(tokens, existing)
                if match is not None:
                    draft = updates.get(match.fid)
                    if draft is None:
                        draft = _Draft(match.fid, match.info, match.type, match.frequency + 1, match.related, "update")
                        updates[match.fid] = draft
                    draft.absorb(info, related, session_id, int(turn["index"]))
                    continue
                same = _best_match(tokens, new)
                if same is not None:
                    same.absorb(info, related, session_id, int(turn["index"]))
                    continue
                draft = _Draft(f"NEW_{len(new) + 1}", info, classify(clause), 1, related, "add")
                draft.cite(session_id, int(turn["index"]))
                new.append(draft)
    ordered_updates = [updates[d.fid] for d in existing if d.fid in updates]
    return {"facts": [d.as_answer() for d in [*ordered_updates, *new]]}


@simulates("memory_consolidation")
def merge_facts(variables: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    facts = list(variables.get("facts", []))
    if not facts:
        raise ValueError("memory_consolidation needs at least one fact to merge")
    tokens = [_content_tokens(f["info"]) for f in facts]
    main = max(range(len(facts)), key=lambda i: (len(tokens[i]), -i))
    parts: list[str] = []
    covered: set[str] = set()
    for i in [main, *(i for i in range(len(facts)) if i != main)]:
        for piece in str(facts[i]["info"]).split("; "):  # earlier merges are read clause by clause
            text = piece.strip().rstrip(" .")
            piece_tokens = _content_tokens(text)
            if not text or piece_tokens <= covered or len(parts) >= MAX_MERGED_PARTS:
                continue
            keep_case = not parts or text.startswith("User") or (len(text) > 1 and text[1].isupper())
            parts.append(text if keep_case else text[:1].lower() + text[1:])
            covered |= piece_tokens
    counts = Counter(str(f["type"]) for f in facts)
    top = max(counts.values())
    fact_type = str(facts[main]["type"]) if counts[str(facts[main]["type"])] == top else next(
        str(f["type"]) for f in facts if counts[str(f["type"])] == top
    )
    related: list[str] = []
    seen: set[str] = set()
    for fact in [facts[main], *facts]:
        for entity in fact.get("related_entities", []):
            if entity.lower() not in seen:
                seen.add(entity.lower())
                related.append(entity)
    return {
        "info": "; ".join(parts),
        "type": fact_type,
        "frequency": sum(int(f["frequency"]) for f in facts),
        "related_entities": related[:MAX_MERGED_ENTITIES],
    }
