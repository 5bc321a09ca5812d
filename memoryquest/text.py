"""Text utilities shared by the stages, the audit and the simulator.

One sentence splitter, one stop-word list and one stemmer (Snowball English,
from ``snowballstemmer``), so that "content words shared by a query and a
reference" means the same thing at generation, in ``validate`` and in the audit.
"""

from __future__ import annotations

import re
from functools import lru_cache

import snowballstemmer

STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against all also am an and any are aren't as at be because been before
    being below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't
    down during each few for from further get gets got had hadn't has hasn't have haven't having he he'd
    he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if in into is
    isn't it it's its itself just let's like me more most much must mustn't my myself no nor not now of
    off on once only or other ought our ours ourselves out over own please really same shan't she she'd
    she'll she's should shouldn't so some such than that that's the their theirs them themselves then
    there there's these they they'd they'll they're they've this those through to too under until up
    upon us very was wasn't we we'd we'll we're we've were weren't what what's when when's where where's
    which while who who's whom why why's will with won't would wouldn't you you'd you'll you're you've
    your yours yourself yourselves one two three four five six seven eight nine ten user user's
    can help want need like would could maybe thing things lot bit
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""English function words, plus words every request or statement uses ("help", "want", "user")."""

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_STEMMER = snowballstemmer.stemmer("english")


# A sentence that announces itself marks what it carries: a reader (or a classifier) finds the
# reference without reading for meaning. Real models reach for these when told a detail matters.
# The idioms below are the plainest cases; :func:`announcement` also finds the shapes they share.
ANNOUNCEMENTS = re.compile(
    r"\b(?:by the way|btw|just so you know|i should mention|i should say|i wanted to mention|"
    r"worth mentioning|for context|for the record|fyi|side note|before i forget|heads[- ]up|"
    r"incidentally|oh,? and another thing)\b",
    re.IGNORECASE,
)
# A sentence that points ahead tells the reader it will matter later: foreshadowing.
# Likewise the plainest cases; :func:`forward_cue` finds the shapes.
FORWARD_CUES = re.compile(
    r"\b(?:keep (?:that |this |it )?in mind|worth remembering|for future reference|"
    r"(?:will|'ll|might|may) (?:matter|come in handy|be (?:important|relevant|useful))|"
    r"down the (?:line|road)|when the time comes|(?:for|matters? for) (?:my|our) upcoming|"
    r"remember (?:that|this) (?:for|when)|which (?:will )?matters? (?:for|when))\b",
    re.IGNORECASE,
)

# --- the shapes of announcing -------------------------------------------------------------------
# Words about the talk itself, not about the world: a sentence-initial phrase made of these (and
# function words) and set off by a comma, colon or dash says "here comes something", nothing else
# ("On a different note, ...", "Unrelated, but ...", "Quick update: ...").
_TALK_WORDS = frozenset(
    """
    note notes aside side sidenote tangent tangentially topic topics subject unrelated unrelatedly
    separate separately different random randomly update updates news
    anyway anyways incidentally besides fyi btw ps record context reference thought thoughts
    mention mentioning forget forgot forgetting totally completely entirely changing
    change switching gears gear speaking which reminds reminded interestingly
    funnily story short long
    """.split()  # noqa: SIM905 - a word list reads better as text
)
# Words that may stand beside talk words in such a phrase without giving it content of its own.
_FILLER_WORDS = frozenset(
    """
    oh ah and but so well okay ok just now also one more last little small fun big good bad great quick
    exciting some
    """.split()  # noqa: SIM905 - a word list reads better as text
)
_DETACHED_LEAD = re.compile(
    r"^\W*(?P<lead>[^,;:\u2014\u2013()]{1,60}?)\s*(?:,|:|;|\u2014|\u2013|\s-\s|\()"
)
# A lead-in that frames what follows as an aside, whatever its topic ("Speaking of hotels, ...").
_ASIDE_FRAME = re.compile(
    r"^\W*(?:speaking of|on the (?:subject|topic) of|while (?:we'?re|i'?m) (?:at it|on (?:the )?(?:subject|topic))|"
    r"while i (?:remember|think of it)|(?:now that i|come to) think (?:of|about) it|that reminds me|"
    r"(?:one more|another|one last) thing|not that it matters|(?:i'?m )?not sure (?:if|whether) (?:it|this|that) matters|in case (?:it|this|that) "
    r"(?:matters|helps|is useful|comes up)|if it helps|for what it'?s worth|fwiw|random(?:ly)?(?: but)?|"
    r"unrelated(?:ly)?(?: but)?|on another note|on a (?:separate|different|related|side|personal) note)\b",
    re.IGNORECASE,
)
# The speaker saying that they are telling: "I should mention", "let me tell you", "thought you
# should know". Verbs of telling after a first person who means to, ought to or just does.
_TELLING = r"(?:mention|tell you|let you know|share (?:that|this|something)|note that|add that|point out|flag|update you|fill you in|give you a heads)"
_SELF_TELLING = re.compile(
    rf"\b(?:i|we)(?:'d| would| should| must| have to| need to| want to| wanted to| meant to| forgot to| "
    rf"thought i'?d| figured i'?d| might as well| just wanted to| just want to)(?: \w+)?? {_TELLING}\b"
    rf"|\blet me (?:just |quickly |also )?{_TELLING}\b"
    rf"|\b(?:thought|figured) (?:you|you'?d) (?:should|might|would|ought to) (?:know|want to know|like to know)\b"
    rf"|\byou (?:should|ought to|might want to) know\b",
    re.IGNORECASE,
)

# --- the shapes of pointing ahead ---------------------------------------------------------------
# What is told, referred to by a pronoun ("it", "that", "which", "this detail") ...
_TOLD = r"(?:it|this|that|which|these|those|all (?:of )?(?:this|that)|knowing (?:this|that)|this (?:detail|info|bit|part)|that (?:detail|info|bit|part))"
# ... said to matter: the predicates of relevance, which carry no content of their own.
_MATTERS = (
    r"(?:matter|count|come in handy|come into play|come up|factor in(?:to)?|play (?:a|into|in)|make a difference|"
    r"affect (?:my|our|what|which|where|how)|shape (?:my|our|what|which|where|how)|influence (?:my|our|what|which|where|how)|"
    r"decide (?:what|which|where|how)|be (?:\w+ )?(?:relevant|useful|important|handy|helpful|key|a factor|"
    r"worth (?:knowing|remembering|noting|keeping)|good to know|something to (?:keep|remember|consider|bear|think|factor)))"
)
_FUTURE = r"(?:will|'ll|might|may|could|would|'d|should|is going to|'s going to|are going to|is likely to|is bound to|is sure to)"
# An anaphoric subject with a future or modal and a relevance predicate: "It'll probably matter ...",
# "which could come into play", "that might affect what I pick".
_PROJECTED = re.compile(
    rf"\b{_TOLD}(?: \w+)??\s*{_FUTURE}(?: (?:probably|definitely|likely|surely|certainly|really|also|still|actually|"
    rf"end up|totally|come to))*\s+{_MATTERS}\b",
    re.IGNORECASE,
)
# A later occasion: the next booking, trip or plan, or just "later".
_LATER = (
    r"(?:later(?: on)?|for later|in the future|for the future|going forward|down the (?:line|road)|ahead|"
    r"next time|(?:for|on|during|with) (?:my|our|the) (?:next|upcoming|coming|future|later)\b|"
    r"(?:when|once|whenever|if|before) (?:i|we|you) (?:\w+ )?(?:next |eventually |finally |actually )?(?:book|plan|pick|choose|"
    r"order|buy|shop|travel|go|look|search|decide|reserve|arrange|sort|get|need|make|head|schedule|start|move))"
)
# A present-tense relevance predicate about what is told, aimed at a later occasion: "that is
# relevant when I book", "this matters for my next trip".
_AIMED = re.compile(
    rf"\b{_TOLD}(?:(?:'s| is| are)(?: \w+)?? (?:relevant|useful|important|handy|helpful|key|"
    rf"worth (?:knowing|remembering|noting|keeping in mind)|good to know|something to \w+(?: \w+)?)"
    rf"| matters| counts)\s+(?:\w+ ){{0,2}}{_LATER}",
    re.IGNORECASE,
)
# Telling someone (or oneself) to keep a thing for a later occasion: "worth noting for when ...",
# "something to think about when I plan", "remember that when booking".
_KEPT_FOR_LATER = re.compile(
    r"\b(?:worth (?:remembering|keeping in mind|bearing in mind)|"
    r"(?:worth (?:knowing|noting)|good to (?:know|remember|keep in mind)),? "
    r"(?:for|when|if|before|next|once|later)|"
    r"something to (?:keep in mind|remember|consider|bear in mind|think about|factor in)|"
    r"(?:remember|note|keep|bear|store|file|save) (?:that|this|it)(?: \w+)?? (?:in mind |away )?(?:for|when|until|till|next)|"
    r"bear (?:that |this |it )?in mind|make a (?:mental )?note)\b",
    re.IGNORECASE,
)


# --- the user's own later occasion ---------------------------------------------------------------
# A forward pointer has a shape whatever its words: the speaker's own later occasion (a time
# clause with "I" or "we", a future of their own, or a time still to come) next to a pronoun
# that points back at what was just told ("... that will matter once I ..."), or opening the
# sentence as a short frame before the news ("Ahead of X, ...", "Before I ..., ..."). Built from
# grammar words only: subordinators of time, future auxiliaries, pronouns and time adverbs.
_TIME_TO_COME = (
    r"\b(?:later|soon|eventually|someday|upcoming|coming up|in the future|(?<!go )ahead|"
    r"down the (?:line|road)|next (?:week|month|year)|(?:this|next) (?:spring|summer|"
    r"autumn|fall|winter|year))\b"
)
_LATER_TIME = re.compile(_TIME_TO_COME, re.IGNORECASE)
_SELF_LATER = re.compile(
    r"\b(?:when|once|whenever|before|after|until|till|by the time|as soon as)\s+(?:i|we)\b"
    rf"|\b(?:i|we)(?:'ll| will| am going to|'m going to| am about to|'m about to)\b|{_TIME_TO_COME}",
    re.IGNORECASE,
)
# A pronoun that points back ("that", "it", "this"), not a determiner of time ("this evening"),
# among the first words of its clause: what the clause is about. Deep in a clause ("... and don't
# have it until May ahead of a trip") it is that clause's own object.
_POINTS_BACK = re.compile(
    r"^(?:\S+\s+){0,4}?(?:that|it|this|these|those)\b(?!\s+(?:morning|afternoon|evening|night|"
    r"week|weekend|month|year|time|one|spring|summer|autumn|fall|winter))",
    re.IGNORECASE,
)
_FRAME_WORDS_MAX = 10  # a frame before the news is short; a news item with a date in it is not


# Any word that looks past the moment of speaking: a future or modal auxiliary, a time still to
# come, "again", or a time clause ("when we ...", "once I ...", "next time").
_LOOKS_AHEAD = re.compile(
    rf"\b{_FUTURE}\b|\bgoing to\b|\bagain\b|\bnext\b|\bfrom (?:now|here) on\b|\bgoing forward\b|"
    rf"\b(?:when|once|whenever|before|until|till)\s+(?:i|we|you|it|the)\b|{_TIME_TO_COME}|\bfuture\b|"
    r"\bdown the track\b",
    re.IGNORECASE,
)


def looks_ahead(text: str) -> bool:
    """Does ``text`` look past the moment of speaking at all (a future or modal, a time to
    come, "again", "when we ...")? Pointing ahead needs a later occasion; a clause without
    one can say how things stand, not that they will count."""
    return _LOOKS_AHEAD.search(text.replace("\u2019", "'")) is not None


def later_occasion(sentence: str) -> str | None:
    """The words with which a user's ``sentence`` ties what was told to their own later
    occasion, or None: a clause with a pronoun pointing back and a later occasion of the
    speaker's ("that'll shape what I choose when the time comes"), or a short opening clause
    that names a time still to come before the rest ("Ahead of the big move next month, ...").

    Meant for the user's turns: an assistant saying what it will do ("I'll book it") is no
    pointer.
    """
    pieces = clauses(sentence)
    for piece in pieces:
        later = _SELF_LATER.search(piece)
        if later is not None and _POINTS_BACK.search(piece):
            return piece
    opening = pieces[0] if len(pieces) > 1 else ""
    if (
        3 <= len(opening.split()) <= _FRAME_WORDS_MAX
        and _LATER_TIME.search(opening)
        and not _POINTS_BACK.search(opening)
    ):
        return opening
    return None


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters, digits, inner apostrophes)."""
    return _WORD.findall(text.casefold().replace("\u2019", "'"))


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    return str(_STEMMER.stemWord(word))


def content_words(text: str) -> list[str]:
    """Stems of the words that carry meaning, in order (stop-words and 1-letter tokens dropped)."""
    return [stem(w) for w in words(text) if w not in STOPWORDS and len(w) > 1 and not w.isdigit()]


@lru_cache(maxsize=65_536)
def content_stems(text: str) -> frozenset[str]:
    """The :func:`content_words` of ``text`` as a set, memoised: facts are compared again and again."""
    return frozenset(content_words(text))


def shared_content_words(left: str, right: str) -> set[str]:
    """Stems of the content words two texts have in common."""
    return set(content_words(left)) & set(content_words(right))


@lru_cache(maxsize=65_536)
def normalise_text(text: str) -> str:
    """Case-, space- and end-punctuation-insensitive form for verbatim checks, memoised: the
    offline simulator normalises every text a timeline has used again for each news item."""
    return re.sub(r"\s+", " ", text).strip().strip(".!?").casefold()


def contains_verbatim(haystack: str, needle: str) -> bool:
    """Does ``haystack`` contain ``needle`` word for word (ignoring case, spacing, final stop)?"""
    needle_norm = normalise_text(needle)
    return bool(needle_norm) and needle_norm in normalise_text(haystack)


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (split after . ! ? before a capital or digit)."""
    return [s.strip() for s in _SENTENCE_BREAK.split(text.strip()) if s.strip()]


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of the sentences of ``text``, in order."""
    spans: list[tuple[int, int]] = []
    position = 0
    for sentence in split_sentences(text):
        start = text.find(sentence, position)
        if start < 0:  # cannot happen for a split of the same text; keep going defensively
            continue
        spans.append((start, start + len(sentence)))
        position = start + len(sentence)
    return spans


# Where a clause ends inside a sentence: a comma, semicolon, colon, dash or bracket (not the
# comma of "4,000" nor the colon of "9:30").
_CLAUSE_BREAK = re.compile(r"\s*(?:[,:](?!\d)|[;()\[\]\u2014\u2013]|\s-\s)\s*")


def clauses(text: str) -> list[str]:
    """The stretches of ``text`` between punctuation that sets a clause off (comma, semicolon,
    colon, dash, bracket, sentence end): the smallest pieces a sentence adds one by one."""
    return [
        piece.strip()
        for sentence in split_sentences(text)
        for piece in _CLAUSE_BREAK.split(sentence)
        if piece.strip(" .!?")
    ]


_LEAD_IN = re.compile(r"^[^:.!?]{1,60}:\s+(?=\S)")


def without_lead_in(sentence: str) -> str:
    """The sentence after a short framing lead-in ending in a colon ("The user mentions: ...").

    The frame says how something is told, not what: left in, it costs tokens and
    pulls every framed sentence's vector the same way.
    """
    return _LEAD_IN.sub("", sentence, count=1)


def announcement(sentence: str) -> str | None:
    """The words with which ``sentence`` announces itself, or None.

    An idiom of :data:`ANNOUNCEMENTS`; a sentence-initial phrase about the talk itself, set off by
    a comma, colon or dash, with no content word of its own ("On a different note, ...", "Quick
    update: ..."); a lead-in that frames the rest as an aside ("Speaking of hotels, ..."); or the
    speaker saying they are telling ("I thought you should know", "let me mention").
    """
    found = ANNOUNCEMENTS.search(sentence) or _ASIDE_FRAME.search(sentence)
    if found is None:
        found = _SELF_TELLING.search(sentence)
    if found is not None:
        return found.group(0)
    lead = _DETACHED_LEAD.match(sentence)
    if lead is not None:
        tokens = words(lead.group("lead"))
        if (
            0 < len(tokens) <= 6
            and any(t in _TALK_WORDS for t in tokens)
            and all(t in _TALK_WORDS or t in _FILLER_WORDS or t in STOPWORDS for t in tokens)
        ):
            return lead.group("lead")
    return None


def forward_cue(sentence: str) -> str | None:
    """The words with which ``sentence`` points ahead, or None.

    An idiom of :data:`FORWARD_CUES`; what is told, as a pronoun, said to matter later with a
    future or modal ("It'll probably matter ...", "which could come into play"); said to matter
    now for a later occasion ("that is relevant when I book"); or kept for later ("worth noting
    for when ...", "something to think about when I plan"). A plan for the future is no cue
    ("I'll book the ferry next week"): the cue is a thing said to matter, not a thing to do.
    """
    for pattern in (FORWARD_CUES, _PROJECTED, _AIMED, _KEPT_FOR_LATER):
        found = pattern.search(sentence)
        if found is not None:
            return found.group(0)
    return None


def ngrams(tokens: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


# --------------------------------------------------------------------------- document formatting

# The block and inline constructs of CommonMark and GitHub-flavoured Markdown, each by its name:
# chat turns are plain text, and a turn that uses any of them is written as a document.
_BLOCK_CONSTRUCTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("heading", re.compile(r"(?m)^ {0,3}#{1,6}(?:[ \t]|$)")),
    ("heading underline", re.compile(r"(?m)(?<=\S)\n {0,3}(?:=+|-{2,})[ \t]*$")),
    (
        "thematic break",
        re.compile(r"(?m)^ {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$"),
    ),
    ("block quote", re.compile(r"(?m)^ {0,3}>")),
    ("bullet list", re.compile(r"(?m)^ {0,3}[-+*•▪◦‣][ \t]+\S")),
    ("numbered list", re.compile(r"(?m)^ {0,3}\d{1,9}[.)][ \t]+\S")),
    ("lettered list", re.compile(r"(?m)^ {0,3}[A-Za-z][.)][ \t]+\S.*\n {0,3}[A-Za-z][.)][ \t]+\S")),
    ("code fence", re.compile(r"(?m)^ {0,3}(?:`{3,}|~{3,})")),
    (
        "table",
        re.compile(r"(?m)^ {0,3}\|?[ \t]*:?-{3,}:?[ \t]*(?:\|[ \t]*:?-{3,}:?[ \t]*)+\|?[ \t]*$"),
    ),
)
_INLINE_CONSTRUCTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("strong emphasis", re.compile(r"(\*\*|__)(?=\S)(?:(?!\1).)+?(?<=\S)\1")),
    ("emphasis", re.compile(r"(?<![\w*])\*(?=[^\s*])[^*\n]*?(?<=[^\s*])\*(?![\w*])")),
    ("emphasis", re.compile(r"(?<![\w_])_(?=[^\s_])[^_\n]*?(?<=[^\s_])_(?![\w_])")),
    ("strikethrough", re.compile(r"~~(?=\S)[^~\n]+?(?<=\S)~~")),
    ("code span", re.compile(r"`[^`\n]+`")),
    ("link", re.compile(r"!?\[[^\]\n]+\]\([^)\s]+\)")),
    ("table row", re.compile(r"(?m)^[^|\n]*\S[^|\n]*\|[^|\n]+\|[^|\n]*$\n^[^|\n]*\|[^|\n]+\|")),
)


def document_formatting(text: str) -> str | None:
    """The first Markdown construct ``text`` uses (a heading, a list, emphasis, a table ...), or
    None for plain prose."""
    for name, pattern in (*_BLOCK_CONSTRUCTS, *_INLINE_CONSTRUCTS):
        if pattern.search(text):
            return name
    return None
