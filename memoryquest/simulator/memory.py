"""Simulated answers for memory extraction and consolidation, built from the dialogue text.

Extraction (``memory_extraction``) reads only the USER turns of the sessions it is
given, plus the existing facts, and yields at most one fact per sentence:

* Sentences. Each user turn is split with :func:`memoryquest.text.split_sentences`
  (the splitter the stages use), and every fact quotes the opening words of the
  sentence it came from exactly as they stand in the turn, so the stage can tell which sentence a fact
  was learnt from.
* Statements. Leading discourse markers ("By the way,", "Oh, also —", "For
  context:") are dropped and a trailing request or aside is cut off ("..., so
  can you find ...?", "..., if you can"). What is left is a statement when it
  speaks about the user in the first person (I, I'm, my, me ...), is not a
  question, an instruction ("Please set my alarm") or small talk ("I think that
  works"), and has at least three words. A clause addressed to the assistant
  ("..., so keep that in mind when you plan") is cut; a sentence that is about
  the assistant through and through is skipped.
* Third person, without a subject: "I moved ..." -> "Moved ...", "I love ..."
  -> "Loves ...", "I'm ..." -> "Is ...", "My X ..." -> "User's X ..."; a
  sentence whose subject is not the user ("Sunday mornings I play ...") keeps
  its shape with they/their/them. A comma lead-in ("Last spring, I moved ...")
  moves to the end. The fact is the whole sentence: never clauses joined by ";".
* Type, by the first matching cue family: Event, Preference, Interest, Goal,
  Identity, else Activity.
* Related entities, from the statement without its trailing consequence
  clause (", which complicates late gigs" says what it bears on, not what it
  is about): proper names (runs of capitalised words, never the sentence's
  first word, never "I"/"I'm", weekdays, months or AM/PM; a list's items
  apart), then the domain its words point to (the conversation's only for a
  statement that is no personal constraint), then the head noun of a noun
  phrase or two ("a bad reaction" -> "reaction").
* Upsert. Facts are compared by Jaccard over content-word stems
  (:func:`memoryquest.text.content_words`); a statement at Jaccard >=
  ``UPDATE_JACCARD`` to an existing fact updates that fid (the
  newer wording when it adds words, entities united), one that close to a
  statement already taken from this batch becomes more evidence for it, and
  anything else is a new fact ``NEW_<n>``.

Consolidation (``memory_consolidation``): the merged info is ONE of the members
(the most informative: most content words, then the most recent) — an atomic
statement, never a concatenation; the type is the most common one (ties: the
chosen member's); entities are the cleaned, case-insensitive union (at most
eight); frequency is the sum.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Set
from functools import lru_cache
from typing import Any

from memoryquest.memory.consolidation_contracts import ConsolidationInputs
from memoryquest.memory.extraction_contracts import ExtractionInputs
from memoryquest.simulator import simulates
from memoryquest.simulator.grammar import from_first_person
from memoryquest.simulator.needs import classify_need, infer_domains
from memoryquest.simulator.needs.bank import NUMBER_WORDS
from memoryquest.simulator.needs.bridges import core_of
from memoryquest.text import STOPWORDS, content_words, opening_words, split_sentences

UPDATE_JACCARD = 0.6
MIN_WORDS = 3
MAX_ENTITIES = 5
MAX_UPDATED_ENTITIES = 6
MAX_MERGED_ENTITIES = 8
MAX_TOPICS = 2

_FIRST = r"(?:I|I'm|I've|I'd|I'll|My)"
# Discourse markers that can open a sentence without punctuation ("Also I ...", "By the way my ...").
_MARKER = re.compile(
    r"^(?:also|actually|by the way|btw|anyway|honestly|just so you know|fyi|for context|for the record|"
    r"for what it's worth|and|but|so|plus|incidentally|as i mentioned|as i said|as you know|one more thing|"
    r"oh and|side note|in fact|funny enough|to be honest|truth be told|speaking of which|now that i think of it|"
    r"come to think of it|before i forget|on that note|quick note|worth saying|worth mentioning|"
    r"in case it matters|if it helps|if it matters|in any case|either way|let me think|let me see|let's see|"
    r"now that you ask|now that you mention it|since you ask|good question|off the top of my head|right,? so|"
    r"well,? one thing|on that note)\b[,!.:]?\s*(?:[—–-]+\s*)?",
    re.IGNORECASE,
)
# Interjections, only when punctuation closes them ("Oh, ...", "No — ...", "Thanks!").
_INTERJECTION = re.compile(
    r"^(?:oh|well|yeah|yes|no|sure|okay|ok|hmm|right|hi there|hey there|hi again|hello again|hi|hey|hello|hiya|"
    r"good morning|good evening|morning|evening|great|perfect|thanks|thank you|ah|alright|"
    r"got it|fair enough|true|good point|nice|cool)\s*(?:[,!.:]+|\s[—–-]+)\s*",
    re.IGNORECASE,
)
# "Since you asked, ...", "As you may remember, ..." — a lead-in about the assistant.
_YOU_LEAD = re.compile(r"^[^,]{0,40}\byou\b[^,]{0,30},\s+(?=\S)", re.IGNORECASE)
# "Oh, one more thing —", "Quick context:" — a short lead-in closed by a dash or a colon.
_DASH_LEAD = re.compile(r"^(?P<lead>[^—–:;]{1,40}?)\s*(?:[—–]|\s-\s|:)\s+(?P<rest>\S.*)$")
_SUBJECT = re.compile(rf"^{_FIRST}\b")
_LEAD_IN = re.compile(rf"^(?P<lead>[^,]{{2,48}}),\s+(?P<clause>{_FIRST}\b.*)$")
_IMPERATIVE = re.compile(
    r"^(?:please|set|book|find|show|tell|give|help|remind|add|check|send|make|get|play|search|look|"
    r"suggest|recommend|schedule|cancel|change|update|let|list|compare|reserve|order|buy|plan|text|"
    r"call|message|email|draft|write|put|move|turn|keep|note|remember|save|track|sort|pick|choose|"
    r"go ahead|skip|drop|swap|lock|hold|mute|share|start|try|pull|line|narrow|flag|factor)\b",
    re.IGNORECASE,
)
_FIRST_PERSON_WORD = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|myself)\b", re.IGNORECASE)
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
_SKIP = re.compile(
    r"^(?:I (?:need|want) you|I'd like you|I would like you|I was wondering|I wonder|I'm wondering|"
    r"I'd appreciate|I would appreciate|I appreciate|I think (?:that|this|it|so)|I guess|I agree|"
    r"I see(?=[,.!]|$)|I understand|I'm not sure|I am not sure|I don't know|I do not know|I hope (?:that|this|it)|"
    r"I'll (?:take|go with|check|think|look|try|keep|do that|leave|sort|have a look)|"
    r"I'm (?:glad|happy|excited) (?:to hear|that|about that|with that)|"
    r"I (?:love|like) (?:that|this|it|those|these|the sound|the idea|both)\b|I'm (?:all )?set\b|I'm good\b|I'm done\b|"
    r"That's it|I have a question|I have another question|I'm curious (?:if|whether|what|how)|"
    r"I could use (?:some |a little )?(?:help|assistance|a hand)|I need (?:some |a little )?(?:help|assistance|a hand)\b|"
    r"(?:that|this|it)(?:'s| is| was| works| sounds)\b|sounds\b|works for\b|perfect\b|great\b)",
    re.IGNORECASE,
)
_REQUEST = re.compile(
    r"^(?:(?:can|could|would|will) (?:you|we)\b|help me\b|let's\b|any chance\b|hoping you can\b|quick one\b|"
    r"time to\b|I(?:'d| would) (?:like|love)\b|I(?:'m| am) (?:hoping|trying|looking) to\b|I (?:want|need) to\b|"
    r"today I (?:want|need)\b|I've been meaning to\b|please\b)",
    re.IGNORECASE,
)
_ADDRESSES_ASSISTANT = re.compile(r"\b(?:you|your|yours)\b", re.IGNORECASE)

_IRREGULAR_PAST = frozenset(
    [
        "went",
        "got",
        "took",
        "bought",
        "saw",
        "had",
        "was",
        "were",
        "made",
        "ran",
        "began",
        "left",
        "met",
        "lost",
        "found",
        "came",
        "became",
        "flew",
        "drove",
        "wrote",
        "spent",
        "sold",
        "won",
        "broke",
        "fell",
        "felt",
        "kept",
        "paid",
        "quit",
        "told",
        "thought",
        "wore",
        "gave",
        "sent",
        "built",
        "brought",
        "caught",
        "chose",
        "did",
        "drank",
        "ate",
        "forgot",
        "grew",
        "heard",
        "hit",
        "hurt",
        "knew",
        "led",
        "lent",
        "let",
        "meant",
        "rode",
        "rang",
        "rose",
        "sang",
        "sat",
        "slept",
        "spoke",
        "stood",
        "stole",
        "swam",
        "taught",
        "tore",
        "understood",
        "woke",
        "threw",
        "signed",
    ]
)
_MODALS = frozenset(["can", "could", "should", "must", "might", "may", "shall", "would", "will"])
_ADVERBS = frozenset(
    [
        "usually",
        "always",
        "often",
        "really",
        "also",
        "just",
        "still",
        "recently",
        "finally",
        "never",
        "sometimes",
        "mostly",
        "generally",
        "absolutely",
        "definitely",
        "typically",
        "only",
        "actually",
        "even",
        "already",
        "mainly",
        "normally",
        "rarely",
        "occasionally",
        "frequently",
        "regularly",
        "especially",
        "currently",
        "truly",
        "totally",
        "basically",
        "honestly",
        "lately",
        "now",
        "nearly",
        "almost",
        "probably",
        "simply",
    ]
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
_EVENT = re.compile(
    r"\b(?:injur\w*|broke (?:my|a|an)|broken|sprain\w*|surgery|operation|diagnos\w*|hospital\w*|sick|illness|"
    r"pregnan\w*|new baby|had a baby|moved|moving|relocat\w*|lost (?:my|a|an|the|our)|laid off|got fired|"
    r"got married|getting married|engaged|divorc\w*|promot\w*|new job|retir\w*|passed away|accident|"
    r"allerg\w*|graduat\w*|bought a (?:house|home|car|new)|got a raise|pay cut|tight budget|budget is tight|"
    r"broke up|recover\w*|quit my|started a new|anniversary|birthday|wedding|expir\w*|cancel\w*)\b",
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

# Entities: runs of capitalised tokens (with a few lower-case joiners inside a name).
_TOKEN = re.compile(r"[A-Za-z0-9][\w'&.+/-]*|&")
_BREAK = re.compile(r"\s*([,;:()\u2014\u2013]|\s-\s)")
_JOINERS = frozenset({"of", "the", "de", "du", "la", "van", "von", "and", "&"})
_CALENDAR_WORDS = frozenset(
    [
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ]
)
_NOT_ENTITIES = frozenset(
    {"i", "i'm", "i've", "i'd", "i'll", "user", "user's", "am", "pm", "oh", "ok", "okay"}
)
# Words that are never topics on their own: verbs, adjectives and fillers a statement is made of.
_NOT_TOPICS = frozenset(
    [
        "prefer",
        "preferred",
        "favourite",
        "favorite",
        "love",
        "loves",
        "like",
        "likes",
        "enjoy",
        "enjoys",
        "hate",
        "hates",
        "going",
        "usually",
        "always",
        "never",
        "really",
        "often",
        "recently",
        "would",
        "should",
        "could",
        "lately",
        "these",
        "days",
        "since",
        "until",
        "after",
        "before",
        "still",
        "pretty",
        "quite",
        "whole",
        "every",
        "each",
        "week",
        "weeks",
        "month",
        "months",
        "year",
        "years",
        "weekend",
        "weekends",
        "morning",
        "mornings",
        "evening",
        "evenings",
        "night",
        "nights",
        "afternoon",
        "afternoons",
        "today",
        "tonight",
        "tomorrow",
        "time",
        "times",
        "thing",
        "things",
        "stuff",
        "something",
        "anything",
        "everything",
        "someone",
        "good",
        "great",
        "nice",
        "best",
        "better",
        "worst",
        "fine",
        "okay",
        "small",
        "large",
        "little",
        "big",
        "much",
        "many",
        "more",
        "most",
        "less",
        "least",
        "sure",
        "keep",
        "keeps",
        "kept",
        "make",
        "makes",
        "made",
        "take",
        "takes",
        "took",
        "started",
        "start",
        "stick",
        "sticking",
        "trying",
        "tried",
        "using",
        "used",
        "use",
        "getting",
        "gets",
        "think",
        "thinking",
        "feel",
        "feeling",
        "looking",
        "look",
        "found",
        "find",
        "book",
        "booked",
        "booking",
        "plan",
        "plans",
        "planning",
        "least",
        "kind",
        "sort",
        "type",
        "types",
        "part",
        "parts",
        "place",
        "places",
        "usual",
        "normal",
        "lately",
        "mostly",
        "actually",
        "probably",
        # nouns too general to say what a statement is about
        "minutes",
        "hours",
        "seconds",
        "annoyance",
        "strain",
        "case",
        "version",
        "change",
        "changes",
        "way",
        "number",
        "couple",
        "amount",
        "rest",
        "deal",
        "point",
        "reason",
        "problem",
        "issue",
        "idea",
    ]
)


# --------------------------------------------------------------------------- text helpers


def content_tokens(text: str) -> set[str]:
    """Content-word stems: what two facts must share to be the same fact."""
    return set(_content_tokens(text))


@lru_cache(maxsize=65536)
def _content_tokens(text: str) -> frozenset[str]:
    """Memoised: every extraction call re-reads all existing facts of the persona."""
    return frozenset(content_words(text))


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
    if (
        lower in _MODALS
        or lower in _IRREGULAR_PAST
        or (lower.endswith("ed") and not lower.endswith("eed"))
    ):
        return verb
    if lower.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


def _later_first_person(text: str) -> str:
    return from_first_person(text, "third")


def third_person(clause: str) -> str:
    """'I moved to Toronto' -> 'Moved to Toronto'; 'My sister is a nurse' -> "User's sister is a nurse"."""
    couple = re.match(r"^My ([\w' -]{1,30}?) and I\b(?!')(.*)$", clause)
    if couple:
        return _capitalise(
            f"User and their {couple.group(1)}{_later_first_person(couple.group(2))}"
        )
    if clause.startswith("My "):
        return "User's " + _later_first_person(clause[3:])
    companion = re.match(r"^([A-Z][\w' -]{0,30}?) and I\b(?!')(.*)$", clause)
    if companion and not _FIRST_PERSON_WORD.search(companion.group(1)):
        who = companion.group(1)
        who = (
            who
            if who.split()[0].lower() in _CALENDAR_WORDS or who[1:2].isupper()
            else who[:1].lower() + who[1:]
        )
        return f"User and {who}{_later_first_person(companion.group(2))}"
    for pattern, replacement in _STARTS:
        if pattern.match(clause):
            return replacement + _later_first_person(pattern.sub("", clause, count=1))
    tokens = clause.split()
    if not tokens or tokens[0] != "I":
        return _capitalise(_later_first_person(clause))
    rest = tokens[1:]
    adverbs: list[str] = []
    while rest and rest[0].lower() in _ADVERBS:
        adverbs.append(rest.pop(0))
    if not rest:
        return _capitalise(_later_first_person(" ".join(adverbs)))
    verb = _third_singular(rest[0])
    return _capitalise(_later_first_person(" ".join([*adverbs, verb, *rest[1:]])))


def _lead_as_tail(lead: str) -> str:
    """'Last spring' -> ' last spring'; names of days and months keep their capital."""
    first = lead.split()[0]
    keep = first.lower() in _CALENDAR_WORDS or (
        len(first) > 1 and (first.isupper() or first[1:] != first[1:].lower())
    )
    return " " + (lead if keep else lead[:1].lower() + lead[1:])


def _strip_lead_ins(text: str) -> str:
    previous = None
    while text and text != previous:
        previous = text
        text = _INTERJECTION.sub("", text, count=1)
        text = _MARKER.sub("", text, count=1).lstrip(" ,—–-")
        text = _YOU_LEAD.sub("", text, count=1)
        dash = _DASH_LEAD.match(text)
        if (
            dash is not None
            and not _FIRST_PERSON_WORD.search(dash.group("lead"))
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
        if lead_in is not None and not _FIRST_PERSON_WORD.search(lead_in.group("lead")):
            tail = _lead_as_tail(lead_in.group("lead"))
            text = lead_in.group("clause")
        elif not _FIRST_PERSON_WORD.search(_SIGN_OFF.sub("", text)) or _IMPERATIVE.match(text):
            return None
    text = "My" + text[2:] if text.startswith("my ") else _capitalise(text)
    if _SKIP.match(text) or len(text.split()) < MIN_WORDS:
        return None
    return text + tail


def statements(text: str) -> list[str]:
    """The first-person statements of one user turn, one per sentence, in order."""
    return [s for s in (statement(raw) for raw in split_sentences(text)) if s]


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


def _clean_entity(value: str) -> str:
    value = value.strip(" .,;:'\"()")
    value = re.sub(r"'s$", "", value)
    return value


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

    def close() -> None:
        while run and run[-1].lower() in _JOINERS:
            run.pop()
        if run:
            name = _clean_entity(" ".join(run))
            if name and name.lower() not in _NOT_ENTITIES and name.lower() not in _CALENDAR_WORDS:
                names.append(name)
        run.clear()

    for position, (token, mark) in enumerate(tokens):
        bare = token.rstrip(".,'")
        lower = bare.lower()
        capital = bare[:1].isupper() or (bare[:1].isdigit() and bool(run))
        if position == 0 or lower in _NOT_ENTITIES or lower in _CALENDAR_WORDS:
            close()
            continue
        if capital:
            run.append(bare)
        elif run and lower in _JOINERS and not (listing and lower == "and"):
            run.append(lower)
        else:
            close()
            listing = listing and lower == "and"
        if mark or token.endswith("."):
            listing = mark == "," and bool(run)
            close()
    close()
    return names


_DETERMINERS = frozenset(
    {"a", "an", "the", "my", "his", "her", "their", "our", "your", "some", "any", "no"}
    | {"another", "this", "these", "those", "new", *NUMBER_WORDS[1:11]}
)
"""Words that open a noun phrase: the phrase's last word before a break is its head noun."""
_PHRASE_BREAKS = frozenset(
    {
        "till",
        "right",
        "next",
        "coming",
        "still",
        "went",
        "means",
        "gives",
        "named",
        "paid",
        "late",
        "near",
        "across",
        "ago",
        "away",
        "about",
        "back",
        "down",
        "off",
        "over",
        "around",
        "instead",
        "anymore",
        "though",
        "even",
        "just",
        "more",
        "less",
        "most",
        "much",
        "many",
        "other",
        "same",
        "such",
        "own",
        "only",
        "very",
        "already",
        "soon",
        "up",
        "out",
        "whole",
        "entire",
        "first",
        "last",
        "few",
        "lot",
        "bit",
        # verbs that follow a subject noun: "the flatmate plays", "the knee needs"
        "needs",
        "plays",
        "comes",
        "goes",
        "gets",
        "takes",
        "makes",
        "keeps",
        "leaves",
        "shifts",
        "runs",
        "starts",
        "ends",
        "works",
        "lives",
        "stays",
        "feels",
        "looks",
        "seems",
        "says",
        "wants",
        "likes",
        "loves",
        "hates",
        "uses",
        "has",
        "does",
        "joins",
        "hurts",
        "costs",
        "settles",
        "sits",
        "falls",
        "breaks",
    }
)
"""Words that end a noun phrase (or that it never ends on): adverbs, particles, quantifiers, verbs."""
_PHRASE_WORD = re.compile(r"[a-z][a-z-]*[a-z]|[a-z]")


def _topics(clause: str) -> list[str]:
    """A couple of head nouns of the statement's noun phrases ("a bad reaction" -> "reaction").

    Only phrases a determiner opens count, so verbs, adverbs and adjectives
    standing alone never become topics.
    """
    tokens = re.findall(r"[A-Za-z0-9][\w'+/-]*|[^\sA-Za-z0-9]", clause)
    heads: list[str] = []
    index = 0
    while index < len(tokens):
        if tokens[index].lower() not in _DETERMINERS and not tokens[index].isdigit():
            index += 1
            continue
        index += 1
        phrase: list[str] = []
        while index < len(tokens) and _PHRASE_WORD.fullmatch(tokens[index]):
            word = tokens[index]
            if word in STOPWORDS or word in _DETERMINERS or word in _PHRASE_BREAKS:
                break
            if phrase and word.endswith(("ly", "ed")):
                break
            phrase.append(word)
            index += 1
        if phrase:
            heads.append(phrase[-1])
    candidates = [w for w in heads if len(w) >= 4 and w not in _NOT_TOPICS and not w.endswith("ly")]
    unique = list(dict.fromkeys(candidates))
    return sorted(unique, key=lambda w: (-len(w), unique.index(w)))[:MAX_TOPICS]


def entities(clause: str, domain: str) -> list[str]:
    """Names, the domain the statement is about and a topic noun or two, from the statement's core.

    A trailing consequence clause (", which complicates late gigs") says what
    the fact bears on, not what it is about, so it adds nothing. The domain is
    the one the statement's own words point to; the conversation's only for a
    statement that is no personal constraint (it is then about what the user
    was chatting about), so news told in passing is not filed under the chat.
    """
    core = core_of(clause)
    found: list[str] = []
    seen: set[str] = set()

    def keep(value: str) -> None:
        value = _clean_entity(value)
        if value and value.lower() not in _NOT_ENTITIES and value.lower() not in seen:
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
        while words_ and words_[-1].lower() in _NOT_ENTITIES:
            words_.pop()
        while words_ and words_[0].lower() in _NOT_ENTITIES:
            words_.pop(0)
        text = " ".join(words_)
        if text and text.lower() not in seen and text.lower() not in _CALENDAR_WORDS:
            seen.add(text.lower())
            kept.append(text)
    return kept[:limit]


# --------------------------------------------------------------------------- answers


class _Draft:
    def __init__(self, fid: str, info: str, fact_type: str, related: list[str]) -> None:
        self.fid = fid
        self.info = info
        self.type = fact_type
        self.related = clean_entities(list(related), MAX_UPDATED_ENTITIES)
        self.tokens: Set[str] = _content_tokens(info)
        self.evidence: list[dict[str, Any]] = []

    def absorb(self, info: str, related: list[str], session_id: str, turn: int, quote: str) -> None:
        tokens = _content_tokens(info)
        if not tokens <= self.tokens:
            self.info = info
            self.tokens = self.tokens | tokens
        self.related = clean_entities(self.related + related, MAX_UPDATED_ENTITIES)
        self.cite(session_id, turn, quote)

    def cite(self, session_id: str, turn: int, quote: str) -> None:
        item = {"session_id": session_id, "turn_indices": [turn], "quote": quote}
        if item not in self.evidence:
            self.evidence.append(item)

    def as_answer(self) -> dict[str, Any]:
        return {
            "fid": self.fid,
            "info": self.info,
            "type": self.type,
            "related_entities": self.related,
            "evidence": self.evidence,
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
    return bool(_REQUEST.match(_strip_lead_ins(" ".join(sentence.replace("\u2019", "'").split()))))


def facts_of_turn(
    content: str, domain: str, *, opening: bool = False
) -> list[tuple[str, str, str, list[str]]]:
    """(sentence, info, type, entities) for every statement sentence of one user turn.

    In the conversation's ``opening`` turn the request itself is not a fact about the user.
    """
    out = []
    for position, raw in enumerate(split_sentences(content)):
        if opening and position == 0 and is_request(raw):
            continue
        clause = statement(raw)
        if clause is None:
            continue
        info = third_person(clause)
        if ";" in info:
            info = info.replace(";", ",")
        out.append((raw, info, classify(clause), entities(clause, domain)))
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
        session_id = session["session_id"]
        domain = str(session.get("domain", ""))
        first_user = next(
            (int(t["index"]) for t in session.get("turns", []) if t.get("role") == "user"), -1
        )
        for turn in session.get("turns", []):
            if turn.get("role") != "user":
                continue
            index = int(turn["index"])
            content = str(turn.get("content", ""))
            for sentence, info, fact_type, related in facts_of_turn(
                content, domain, opening=index == first_user
            ):
                quote = opening_words(sentence, inputs.quote_words)
                tokens = _content_tokens(info)
                if not tokens:
                    continue
                match = _best_match(tokens, existing)
                if match is not None:
                    draft = updates.get(match.fid)
                    if draft is None:
                        draft = _Draft(match.fid, match.info, match.type, match.related)
                        updates[match.fid] = draft
                    draft.absorb(info, related, session_id, index, quote)
                    continue
                same = _best_match(tokens, new)
                if same is not None:
                    same.absorb(info, related, session_id, index, quote)
                    continue
                draft = _Draft(f"NEW_{len(new) + 1}", info, fact_type, related)
                draft.cite(session_id, index, quote)
                new.append(draft)
    ordered_updates = [updates[d.fid] for d in existing if d.fid in updates]
    return {"facts": [d.as_answer() for d in [*ordered_updates, *new]]}


def _atomic(info: str) -> str:
    """One statement: the most informative clause of a text an older merge may have joined with ';'."""
    pieces = [p.strip().rstrip(" .") for p in str(info).split(";") if p.strip()]
    if not pieces:
        return str(info).strip()
    best = max(pieces, key=lambda p: (len(_content_tokens(p)), -pieces.index(p)))
    return _capitalise(best)


@simulates(ConsolidationInputs)
def merge_facts(inputs: ConsolidationInputs, rng: random.Random) -> dict[str, Any]:
    facts = list(inputs.facts)
    if not facts:
        raise ValueError("memory_consolidation needs at least one fact to merge")
    infos = [_atomic(f["info"]) for f in facts]
    tokens = [_content_tokens(info) for info in infos]
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
