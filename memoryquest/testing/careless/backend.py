"""Writing the faults: the simulator, with one item of a fault written into every answer it
applies to, in the corpus's wordings taken in turn.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from memoryquest.ids import draw
from memoryquest.llm.backends import ChatCall, ChatResult
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.memory.extraction_contracts import ExtractionInputs
from memoryquest.stages.dialogues_contracts import DialogueInputs
from memoryquest.stages.queries_contracts import QueryGenerationInputs
from memoryquest.testing.careless.faults import Corpus, Fault, Injection, Wording, load_corpus

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[a-z0-9']+")
_NUMBER = re.compile(r"\d+")
_PLAIN_WORD = re.compile(r"[A-Za-z][A-Za-z-]*")
_LEDGER_LINE = re.compile(r"^\d{4}-\d{2}-\d{2}: (?P<said>.+?)(?: \(until [^)]*\))?$")
# Where a remembered statement's main clause ends and its commentary begins.
_CLAUSE_END = re.compile(r",\s|\s[\u2014\u2013-]\s|;\s|\swhich\s")
_STATEMENT_WORDS = 5  # a clause shorter than this is taken for a lead-in, not the statement
# Words a request is made of that say nothing about its subject (this double's own short list).
_FILLER_TEXT = """a an the and or but for to of in on at by with from about into over than then so as
    is are be been am was were do does did have has had can could would will shall should may
    might must i i'm i'd i've me my mine we our you your it its this that these those there
    here what which who when where how why please help hand need want like love trying try
    looking some any all more most just also really very up out get set let's let make
    day week month monday tuesday wednesday thursday friday saturday sunday january february
    march april may june july august september october november december hoping meaning
    chance okay next thing time around"""
_FILLER_WORDS = frozenset(_FILLER_TEXT.split())
_FIRST_PERSON_VERBS = {
    "is": "I'm",
    "has": "I have",
    "was": "I was",
    "does": "I do",
    "isn't": "I'm not",
    "doesn't": "I don't",
    "hasn't": "I haven't",
    "wasn't": "I wasn't",
}
_ADVERBS_TEXT = "now still just recently also already always never usually often"
_ADVERBS = frozenset(_ADVERBS_TEXT.split())
_PRONOUNS = {"their": "my", "they": "I", "them": "me", "themselves": "myself", "they're": "I'm"}


def _lower_first(text: str) -> str:
    first = text.split(maxsplit=1)[0] if text.split() else ""
    if first in {"I", "I'm", "I've", "I'd", "I'll"} or first[1:2].isupper():
        return text
    return text[:1].lower() + text[1:]


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 3}


def _telling_sentence(turn: str, news: str) -> tuple[int, list[str]]:
    """The sentence of ``turn`` that says ``news`` (most words in common), and all sentences."""
    sentences = _SENTENCE_END.split(turn)
    news_words = _words(news)
    best = max(range(len(sentences)), key=lambda i: len(_words(sentences[i]) & news_words))
    return best, sentences


def _echo_phrase(query: str) -> str:
    """Up to five words of the request's first sentence with most subject words, trimmed of filler."""
    request = query.split(":", 1)[1] if ":" in query[:40] else query
    request = _SENTENCE_END.split(request.strip(), maxsplit=1)[0]
    tokens = [t.strip(string.punctuation + "\u2014") for t in request.split()]
    tokens = [t for t in tokens if _PLAIN_WORD.fullmatch(t)]
    best: list[str] = []
    best_score = -1
    for start in range(len(tokens)):
        window = tokens[start : start + 5]
        score = sum(1 for t in window if t.lower() not in _FILLER_WORDS)
        if score > best_score:
            best, best_score = window, score
    while best and best[0].lower() in _FILLER_WORDS:
        best = best[1:]
    while best and best[-1].lower() in _FILLER_WORDS:
        best = best[:-1]
    return " ".join(best)


def _first_person(statement: str) -> str:
    """A remembered statement ('Signed up for a pottery course') as the user says it.

    Its first clause long enough to state something: a statement said with a lead-in
    ("Hmm, ...", "Since you ask, ...") is the clause after it, not the lead-in.
    """
    pieces = _CLAUSE_END.split(statement.strip().rstrip("."))
    clause = next((p for p in pieces if len(p.split()) >= _STATEMENT_WORDS), max(pieces, key=len))
    tokens = clause.split()
    tokens = [_PRONOUNS.get(t.lower(), t) for t in tokens]
    lead: list[str] = []
    if tokens and tokens[0].lower() == "user's":
        return " ".join(["my", *tokens[1:]])
    while len(tokens) > 1 and tokens[0].lower() in _ADVERBS:
        lead.append(tokens.pop(0).lower())
    verb = tokens[0].lower() if tokens else ""
    if verb in _FIRST_PERSON_VERBS:
        subject, *rest = _FIRST_PERSON_VERBS[verb].split()
        return " ".join([subject, *lead, *rest, *tokens[1:]])
    if verb.endswith("ies"):
        verb = verb[:-3] + "y"
    elif verb.endswith(("shes", "ches", "xes", "sses", "zes")):
        verb = verb[:-2]
    elif verb.endswith("s") and not verb.endswith("ss"):
        verb = verb[:-1]
    return " ".join(["I", *lead, verb, *tokens[1:]])


def _changed_value(statement: str) -> str | None:
    """The statement with its first number (not a year) changed; None without one."""
    for match in _NUMBER.finditer(statement):
        value = int(match.group())
        if 1900 <= value <= 2100:
            continue
        new = value + 3 if value < 20 else value - 7
        return statement[: match.start()] + str(new) + statement[match.end() :]
    return None


class CarelessChatBackend(SimulatedChatBackend):
    """The simulator, with one item of ``fault`` written into every answer it applies to.

    Wordings are taken in turn from the corpus, so a run of a few hundred answers uses each
    of them; every planted item is kept in :attr:`injections`.
    """

    def __init__(
        self, fault: Fault, corpus: Corpus | None = None, seed: int = 0, rate: float = 1.0
    ) -> None:
        """``rate``: the part of the answers the fault applies to that get it, drawn from each
        request's own content (1: every one). Below 1 some queries survive the gates, and their
        data shows what the rejections left behind."""
        if not 0 < rate <= 1:
            raise ValueError(f"rate must be in (0, 1], got {rate}")
        super().__init__(seed)
        self.fault = fault
        self.rate = rate
        self.answers = 0  # answers the fault applies to, planted or not
        self.wordings = tuple((corpus or load_corpus())[fault])
        self.injections: list[Injection] = []
        self._next_wording = 0
        self._uses: Counter[str] = Counter()
        writers: dict[Fault, tuple[str, Callable[[dict[str, Any], dict[str, Any]], None]]] = {
            Fault.FORESHADOW: (DialogueInputs.template_id, self._news_sentence),
            Fault.ANNOUNCE: (DialogueInputs.template_id, self._news_sentence),
            Fault.ECHO: (QueryGenerationInputs.template_id, self._echo),
            Fault.INFERENCE: (ExtractionInputs.template_id, self._inference),
            Fault.CONTRADICTION: (DialogueInputs.template_id, self._contradiction),
            Fault.MARKDOWN: (DialogueInputs.template_id, self._markdown),
        }
        self._template_id, self._write = writers[fault]

    async def chat(self, call: ChatCall) -> ChatResult:
        result = await super().chat(call)
        if call.request.template_id != self._template_id or result.text is None:
            return result
        self.answers += 1
        if self.rate < 1 and not self._planted_in(call):
            return result
        answer = json.loads(result.text)
        self._write(answer, dict(call.request.variables))
        return replace(result, text=json.dumps(answer, ensure_ascii=False))

    def _planted_in(self, call: ChatCall) -> bool:
        request = call.request
        content = json.dumps(request.variables, sort_keys=True, default=str)
        return draw(self.fault.value, request.seed, content) % 10_000 < self.rate * 10_000

    def _wording(self, usable: Callable[[Wording], bool] = lambda w: True) -> Wording | None:
        """The next usable wording in turn, the least used first: a wording that can only be
        used now and then (one that needs a number to change) still gets its share."""
        count = len(self.wordings)
        in_turn = [self.wordings[(self._next_wording + k) % count] for k in range(count)]
        candidates = [w for w in in_turn if usable(w)]
        if not candidates:
            return None
        wording = min(candidates, key=lambda w: self._uses[w.id])
        self._next_wording = self.wordings.index(wording) + 1
        self._uses[wording.id] += 1
        return wording

    def _record(
        self, wording: Wording, location: dict[str, Any], planted: str, values: dict[str, str]
    ) -> None:
        self.injections.append(
            Injection(
                injection_id=f"{self.fault.value}#{len(self.injections) + 1:04d}",
                fault=self.fault,
                wording_id=wording.id,
                location=location,
                planted=planted,
                fragment=wording.fragment(**values),
            )
        )

    @staticmethod
    def _session_location(variables: dict[str, Any], turn_index: int) -> dict[str, Any]:
        event = variables.get("event") or {}
        return {
            "date": event.get("date"),
            "domain": event.get("domain"),
            "description": event.get("description"),
            "turn_index": turn_index,
        }

    def _news_sentence(self, answer: dict[str, Any], variables: dict[str, Any]) -> None:
        """One sentence that tells a news item, rewritten: the cue sits beside the statement."""
        turns = answer.get("turns") or []
        news = variables.get("news") or []
        said = [
            item
            for item in answer.get("news_said") or []
            if item.get("turn_index", -1) in range(0, len(turns), 2)
            and item.get("news_index", -1) in range(len(news))
        ]
        wording = self._wording()
        if not said or wording is None:
            return
        item = said[len(self.injections) % len(said)]
        turn_index = item["turn_index"]
        index, sentences = _telling_sentence(turns[turn_index], news[item["news_index"]])
        sentence = sentences[index]
        values = {"said": sentence, "said_lc": _lower_first(sentence)}
        sentences[index] = wording.fill(**values)
        turns[turn_index] = " ".join(sentences)
        location = self._session_location(variables, turn_index)
        self._record(wording, location, turns[turn_index], values)

    def _echo(self, answer: dict[str, Any], variables: dict[str, Any]) -> None:
        """In each candidate, one reference repeats a run of the request's own words."""
        for candidate in answer.get("candidates") or []:
            references = candidate.get("references") or []
            echo = _echo_phrase(candidate.get("query", ""))
            wording = self._wording()
            if not references or len(echo.split()) < 2 or wording is None:
                continue
            index = len(self.injections) % len(references)
            reference = references[index]["text"].rstrip().rstrip(".")
            values = {
                "reference": reference,
                "reference_lc": _lower_first(reference),
                "echo": echo,
                "query_bare": _lower_first(candidate["query"].strip().rstrip(".?!")),
            }
            # References are drafted without a final full stop; the echo keeps that form.
            references[index]["text"] = wording.fill(**values).rstrip(".")
            location = {"query": candidate["query"], "reference_index": index}
            self._record(wording, location, references[index]["text"], values)

    def _inference(self, answer: dict[str, Any], variables: dict[str, Any]) -> None:
        """One fact of the answer says more than its sentences do."""
        facts = answer.get("facts") or []
        wording = self._wording()
        if not facts or wording is None:
            return
        fact = facts[len(self.injections) % len(facts)]
        sentence_sessions = {
            sentence_id: session["session_id"]
            for session in variables.get("sessions") or []
            for turn in session.get("turns") or []
            for sentence_id in (turn.get("sentences") or {})
        }
        values = {"info": fact["info"].rstrip().rstrip(".")}
        fact["info"] = wording.fill(**values)
        sessions = sorted(
            {
                sentence_sessions[str(s)]
                for s in fact.get("sentences", [])
                if str(s) in sentence_sessions
            }
        )
        location = {"session_ids": sessions, "fid": fact.get("fid")}
        self._record(wording, location, fact["info"], values)

    def _contradiction(self, answer: dict[str, Any], variables: dict[str, Any]) -> None:
        """A user turn ends by taking back the latest earlier statement, or by changing the
        value of the latest one with a number in it."""
        turns = answer.get("turns") or []
        statements = [
            m.group("said")
            for line in variables.get("ledger") or []
            if (m := _LEDGER_LINE.match(line)) and not m.group("said").startswith("talked about:")
        ]
        if not statements or not turns:
            return
        latest = _first_person(statements[-1])
        with_number = next(
            (c for s in reversed(statements) if (c := _changed_value(_first_person(s)))), None
        )
        wording = self._wording(lambda w: "changed" not in w.fields or with_number is not None)
        if wording is None:
            return
        if "changed" in wording.fields:
            assert with_number is not None
            values = {"changed": with_number, "fact": latest}
        else:
            values = {"fact": latest, "changed": ""}
        user_turns = list(range(0, len(turns), 2))
        turn_index = user_turns[len(self.injections) % len(user_turns)]
        turns[turn_index] = turns[turn_index].rstrip() + " " + wording.fill(**values)
        location = self._session_location(variables, turn_index)
        self._record(wording, location, turns[turn_index], values)

    def _markdown(self, answer: dict[str, Any], variables: dict[str, Any]) -> None:
        """One assistant turn is formatted as a document."""
        turns = answer.get("turns") or []
        assistant_turns = list(range(1, len(turns), 2))
        wording = self._wording()
        if not assistant_turns or wording is None:
            return
        turn_index = assistant_turns[len(self.injections) % len(assistant_turns)]
        values = {"turn": turns[turn_index]}
        turns[turn_index] = wording.fill(**values)
        location = self._session_location(variables, turn_index)
        self._record(wording, location, turns[turn_index], values)
