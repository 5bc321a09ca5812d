"""The simulator's conversations on real personas: grounded, on topic, varied, and without tells.

Runs the simulated query, timeline and dialogue answers (no client, no embedder)
for a handful of bundled PersonaLens users, the way the stages call them, and
checks what the audit checks on a full run: a reference turn must not be
recognisable by its surroundings, only by its content.
"""

from __future__ import annotations

import functools
import json
import random
import re
from collections import Counter
from dataclasses import dataclass

import pytest

from memoryquest.contracts import Domain, Persona, TaskKind
from memoryquest.generation.common import persona_variables
from memoryquest.settings import GenerationSettings
from memoryquest.simulator import simulate
from memoryquest.simulator.dialogues import assistant_turn, split_description
from memoryquest.simulator.grammar import fix_articles
from memoryquest.simulator.memory import facts_of_turn, statement
from memoryquest.simulator.needs import classify_need
from memoryquest.simulator.persona_grounding import (
    PersonaMaterial,
    task_scenarios,
)
from memoryquest.simulator.phrasing import (
    Options,
    Setting,
    Voice,
    parse_topic,
    table,
    title,
    with_lead,
)
from memoryquest.stages.timeline_slots import Slot
from memoryquest.stages.timelines import event_news
from memoryquest.text import (
    contains_verbatim,
    content_stems,
    ngrams,
    normalise_text,
    split_sentences,
    words,
)

try:
    from tests.generation_fixture import interaction_sentences, load_users, simulated_timeline
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from generation_fixture import interaction_sentences, load_users, simulated_timeline

USERS = tuple(f"user{i}" for i in range(6))
QUERIES_PER_USER = 6


@dataclass
class Session:
    persona: Persona
    query: dict
    event: dict
    answer: dict

    @property
    def turns(self) -> list[dict]:
        """The answer's turns with their roles (user first, then alternating)."""
        roles = ("user", "assistant")
        return [{"role": roles[i % 2], "content": t} for i, t in enumerate(self.answer["turns"])]

    slot: Slot | None = None

    @property
    def reference(self) -> dict | None:
        carried = self.slot and self.slot.reference
        if not carried:
            return None
        return next(r for r in self.query["references"] if r["text"] == carried.text)

    @property
    def news(self) -> list[str]:
        """The event's news as the stage gives it (the reference word for word among it)."""
        return (
            self.event["news"] if self.slot is None else event_news(self.event["news"], self.slot)
        )

    @property
    def reference_said(self) -> tuple[int, str]:
        """(the turn the answer names for the reference, its sentence sharing most words with it)."""
        assert self.reference is not None
        position = self.news.index(self.reference["text"])
        (item,) = [i for i in self.answer["news_said"] if i["news_index"] == position]
        sentences = split_sentences(self.turns[item["turn_index"]]["content"])
        wanted = set(words(self.reference["text"]))
        return item["turn_index"], max(sentences, key=lambda s: len(wanted & set(words(s))))


def _query_variables(persona: Persona, settings: GenerationSettings) -> dict:
    variables = persona_variables(persona)
    variables.update(
        count=settings.candidates_per_user,
        references_min=settings.references_min,
        references_max=settings.references_max,
        query_date_start=settings.query_date_start.isoformat(),
        query_date_end=settings.query_date_end.isoformat(),
        reference_window_days=settings.reference_window_days,
        news_words_min=settings.news_words_min,
        news_words_max=settings.news_words_max,
        domains=[d.value for d in Domain],
        already_proposed=[],
    )
    return variables


def _dialogue_variables(
    persona: Persona, event: dict, news: list[str], settings: GenerationSettings
) -> dict:
    domain = Domain(event["domain"])
    date = event["date"]
    import datetime as dt

    return {
        "event": {
            "date": date,
            "weekday": dt.date.fromisoformat(date).strftime("%A"),
            "domain": domain.value,
            "description": event["description"],
        },
        "news": news,
        "demographics": persona.demographics.model_dump(mode="json"),
        "interaction_summary": PersonaMaterial(
            persona.demographics, persona.affinities, persona.interactions, persona.tasks
        ).interaction(domain),
        "affinities": [a.model_dump(mode="json") for a in persona.affinities if a.domain == domain],
        "situations": [
            {s.name: s.value for s in t.situations}
            for t in persona.tasks
            if t.kind == TaskKind.SINGLE_DOMAIN and domain in t.domains and t.situations
        ],
        "turns_min": settings.turns_min,
        "turns_max": settings.turns_max,
    }


@functools.cache
def sessions() -> tuple[Session, ...]:
    settings = GenerationSettings()
    out: list[Session] = []
    for persona in load_users(*USERS):
        candidates = json.loads(simulate("query_generation", _query_variables(persona, settings)))[
            "candidates"
        ]
        for candidate in candidates[:QUERIES_PER_USER]:
            for slot, event in simulated_timeline(persona, candidate, settings):
                session = Session(persona, candidate, event, {}, slot)
                variables = _dialogue_variables(persona, event, session.news, settings)
                session.answer = json.loads(simulate("dialogue_expansion", variables))
                out.append(session)
    return tuple(out)


@pytest.fixture(scope="module")
def all_sessions() -> tuple[Session, ...]:
    return sessions()


# --------------------------------------------------------------------------- the stage's rules


def test_turns_alternate_from_the_user_with_about_one_exchange_per_update(
    all_sessions: tuple[Session, ...],
) -> None:
    settings = GenerationSettings()
    counts = []
    news = []
    for session in all_sessions:
        roles = [t["role"] for t in session.turns]
        assert roles == ["user", "assistant"] * (len(roles) // 2)
        assert settings.turns_min <= len(roles) <= settings.turns_max
        assert all(t["content"].strip() for t in session.turns)
        counts.append(len(roles) // 2)
        news.append(len(session.event["news"]))
    assert 3.5 <= sum(counts) / len(counts) <= 6.5  # 3.96 on this sample of 298 sessions
    assert min(counts) >= 3 and max(counts) <= 10
    # Most user turns carry a piece of news, so the one carrying a reference is not the odd one out.
    assert sum(news) / sum(counts) >= 0.6
    # Nearly every user turn has some: a turn without news would mark the ordinary ones.
    with_news = sum(min(n, c) for n, c in zip(news, counts, strict=True))
    assert with_news / sum(counts) >= 0.85
    by_news = {n: [c for c, k in zip(counts, news, strict=True) if k == n] for n in set(news)}
    fewest, most = by_news[min(by_news)], by_news[max(by_news)]
    assert min(by_news) < max(by_news) and sum(fewest) / len(fewest) < sum(most) / len(most)


def test_the_reference_sentence_is_one_sentence_of_the_named_user_turn(
    all_sessions: tuple[Session, ...],
) -> None:
    checked = 0
    for session in all_sessions:
        if session.reference is None:
            continue
        index, said = session.reference_said
        turn = session.turns[index]
        assert turn["role"] == "user"
        # The named turn is where the user tells the reference: no sentence of another user
        # turn shares more of its words (``said`` is the named turn's best sentence, so only the
        # other user turns can prove it wrong; the assistant may echo what it was told).
        # Content words only: a short paraphrase ("My permit is still on its way") shares few
        # words with its reference, and a long sentence elsewhere can share more stop-words.
        wanted = content_stems(session.reference["text"])
        told = len(wanted & content_stems(said))
        elsewhere = [
            len(wanted & content_stems(sentence))
            for other, t in enumerate(session.turns)
            if other != index and t["role"] == "user"
            for sentence in split_sentences(t["content"])
        ]
        assert told > 0 and told >= max(elsewhere, default=0), (said, session.turns)
        checked += 1
    assert checked > 100


def test_no_turn_repeats_any_reference_of_its_query_word_for_word(
    all_sessions: tuple[Session, ...],
) -> None:
    for session in all_sessions:
        for reference in session.query["references"]:
            for turn in session.turns:
                assert not contains_verbatim(turn["content"], reference["text"]), (
                    reference["text"],
                    turn["content"],
                )


def test_every_update_of_the_event_is_said_once_in_a_user_turn(
    all_sessions: tuple[Session, ...],
) -> None:
    """References and the distractors next to them are stated; filler sessions carry distractors too."""
    with_distractors = 0
    for session in all_sessions:
        updates = session.event["news"]
        if session.reference is None and updates:
            with_distractors += 1
        user_text = " ".join(t["content"] for t in session.turns if t["role"] == "user")
        assistant_text = " ".join(t["content"] for t in session.turns if t["role"] == "assistant")
        # Read sentence by sentence: a remark's bridge clause ends a sentence, not the turn.
        said_needs = {classify_need(s) for s in split_sentences(user_text)} - {None}
        for update in updates:
            need = classify_need(update)
            assert need is None or said_needs
            assert not contains_verbatim(assistant_text, update)
    fillers = sum(1 for s in all_sessions if s.reference is None)
    assert with_distractors >= 0.7 * fillers


# --------------------------------------------------------------------------- no tells around a reference


def _exchanges(all_sessions: tuple[Session, ...]) -> list[tuple[str, str, bool, Session]]:
    out = []
    for session in all_sessions:
        marked = {session.reference_said[0]} if session.reference else set()
        for i in range(0, len(session.turns), 2):
            reply = session.turns[i + 1]["content"] if i + 1 < len(session.turns) else ""
            out.append((session.turns[i]["content"], reply, i in marked, session))
    return out


def test_no_phrase_is_found_only_around_reference_turns(all_sessions: tuple[Session, ...]) -> None:
    """The audit's exclusive n-gram check, on this sample: nothing outside the references' own content marks them."""
    units = _exchanges(all_sessions)
    reference = [u for u in units if u[2]]
    counts: Counter[tuple[str, ...]] = Counter()
    for user, reply, _, _ in reference:
        grams = {g for text in (user, reply) for n in range(2, 6) for g in ngrams(words(text), n)}
        counts.update(grams)
    filler_grams = {
        g
        for user, reply, ref, _ in units
        if not ref
        for text in (user, reply)
        for n in range(2, 6)
        for g in ngrams(words(text), n)
    }
    exclusive = {g: c for g, c in counts.items() if c >= 2 and g not in filler_grams}
    worst = max(exclusive.values(), default=0) / len(reference)
    assert worst < 0.1, sorted(exclusive.items(), key=lambda item: -item[1])[:5]


def _first_sentence(text: str) -> str:
    return split_sentences(text)[0] if text else ""


def test_the_reply_to_a_reference_is_drawn_like_the_reply_to_any_remark(
    all_sessions: tuple[Session, ...],
) -> None:
    """After a reference turn the assistant opens the same ways, as often, as after any other user turn.

    The distance between the two distributions of opening words is no larger than
    the distance a random sample of other replies of the same size has by chance.
    """
    import random

    units = _exchanges(all_sessions)

    def openings(replies: list[str]) -> Counter[str]:
        return Counter(" ".join(words(_first_sentence(r))[:1]) for r in replies if r)

    def distance(a: Counter[str], b: Counter[str]) -> float:
        ta, tb = sum(a.values()), sum(b.values())
        return 0.5 * sum(abs(a[k] / ta - b[k] / tb) for k in set(a) | set(b))

    after_reference = [reply for _, reply, ref, _ in units if ref]
    after_other = [reply for _, reply, ref, _ in units if not ref]
    everyone = openings(after_other)
    rng = random.Random(0)
    chance = [
        distance(openings(rng.sample(after_other, len(after_reference))), everyone)
        for _ in range(30)
    ]
    assert distance(openings(after_reference), everyone) <= max(chance) + 0.03
    # every way of opening seen after a reference is also common elsewhere
    for opening, count in openings(after_reference).items():
        if count >= 5:
            assert everyone[opening] >= 5, opening


def test_the_assistant_reply_never_sees_what_the_remark_was() -> None:
    """Same generator state, same reply: the reply depends on the topic, not on whether a reference was said."""
    import random

    topic = parse_topic(
        "The user wants to discover new music that aligns with their preferred genres.",
        Domain.MUSIC,
    )
    options_a = Options(topic, [], [])
    options_b = Options(topic, [], [])
    for seed in range(50):
        reply_a = assistant_turn(2, False, True, topic, options_a, random.Random(seed))
        reply_b = assistant_turn(2, False, True, topic, options_b, random.Random(seed))
        assert reply_a == reply_b


def test_lead_ins_are_shared_by_updates_and_remarks() -> None:
    """Every lead-in a remark can get is one an update can get, and the memory reads past each of them."""
    for lead in (*table().volunteered, *table().answers):
        said = with_lead("My wrist is in a cast until June 12.", lead)
        assert statement(said) is not None and "wrist" in (statement(said) or ""), said


# --------------------------------------------------------------------------- grounded and on topic


def test_the_user_opens_with_the_request_and_the_assistant_works_on_it(
    all_sessions: tuple[Session, ...],
) -> None:
    for session in all_sessions:
        activity, _ = split_description(session.event["description"])
        topic = parse_topic(activity, Domain(session.event["domain"]))
        assert topic.request in session.turns[0]["content"]
        last_reply = session.turns[-1]["content"]
        if topic.kind != "booking":
            assert not re.search(r"\b(?:booked|reserved)\b", last_reply, re.IGNORECASE), last_reply
    persona = all_sessions[0].persona
    event = {
        "date": "2024-05-10",
        "domain": "Messaging",
        "description": "The user is part of a group chat and wants to mute or leave the conversation temporarily "
        "without causing offense. Chatting in Toronto, Canada on their smartphone in the evening.",
    }
    for seed in range(10):
        variables = _dialogue_variables(persona, event, [], GenerationSettings())
        turns = json.loads(simulate("dialogue_expansion", variables, seed=seed))["turns"]
        assert "mute or leave the conversation temporarily" in turns[0]
        replies = turns[1::2]
        # every proposal is about muting, archiving or notifications — never a booking or an unrelated note
        assert all(
            re.search(r"\b(?:mut|archiv|notification|note|chat|group)", r, re.IGNORECASE)
            for r in replies[:-1]
        ), replies
        assert not re.search(r"\b(?:booked|reserved|cart)\b", " ".join(replies), re.IGNORECASE)


def test_the_assistant_says_the_request_back_to_the_user(
    all_sessions: tuple[Session, ...],
) -> None:
    said_back = 0
    for session in all_sessions:
        activity, _ = split_description(session.event["description"])
        topic = parse_topic(activity, Domain(session.event["domain"]))
        if not re.search(r"\b(?:my|me|myself)\b", topic.request):
            continue
        replies = " ".join(t["content"] for t in session.turns if t["role"] == "assistant")
        assert topic.request not in replies, replies  # "help you share my location"
        said_back += topic.request_to_user in replies
    assert said_back >= 5


TASTE_ONLY = re.compile(
    r"in the spirit of|Fans of|People who follow|one of your favorites|If you liked|"
    r"in common with|came up next to|shares a lot with|Since you enjoy"
)


def test_picks_are_likened_only_to_works_and_artists(all_sessions: tuple[Session, ...]) -> None:
    likened = preferred = 0
    for session in all_sessions:
        replies = " ".join(t["content"] for t in session.turns if t["role"] == "assistant")
        if Domain(session.event["domain"]) in table().taste_domains:
            likened += bool(TASTE_ONLY.search(replies))
        else:
            assert not TASTE_ONLY.search(replies), replies  # "People who follow WiFi ..."
            preferred += bool(re.search(r"preference for|liking for|box for you", replies))
    assert likened >= 5 and preferred >= 5


def test_works_get_no_opening_times_or_distances(all_sessions: tuple[Session, ...]) -> None:
    venue_only = re.compile(
        r"It starts at|The next opening is|minutes from|slot at .* is the quietest"
    )
    works = 0
    for session in all_sessions:
        if Domain(session.event["domain"]) not in table().taste_domains:
            continue
        for turn in session.turns:
            if turn["role"] == "assistant":
                works += 1
                assert not venue_only.search(turn["content"]), turn[
                    "content"
                ]  # "a book starts at 8:50"
    assert works >= 20


def test_an_acknowledgement_before_the_opener_is_a_sentence_of_its_own(
    all_sessions: tuple[Session, ...],
) -> None:
    openers = [t["content"] for s in all_sessions for t in s.turns[1:2]]
    assert sum(". " in o for o in openers) >= 5
    for opener in openers:
        assert not re.search(r", and (?:[A-Z]|happy|sure|of course|let's|glad|okay)", opener), (
            opener
        )


def test_a_closing_after_a_lead_goes_on_in_lower_case(all_sessions: tuple[Session, ...]) -> None:
    closings = [s.turns[-1]["content"] for s in all_sessions if s.turns[-1]["role"] == "assistant"]
    joined = [c for c in closings if re.match(r"[^—;,]{2,40}(?: — |, |; )", c)]
    assert len(joined) >= 20
    for closing in joined:
        # "Sounds good, Happy exploring" / "Thanks for the detail; Message out"
        assert not re.search(
            r"(?: — |, |; )(?:Happy|Message|Tell|Added|Done|Saved|Sent|Glad|Ordered|Reserved)\b",
            closing,
        ), closing


def test_no_word_is_doubled_where_a_favourite_meets_its_template(
    all_sessions: tuple[Session, ...],
) -> None:
    doubled = re.compile(r"\b([a-z][a-z']{2,})\s+\1(?![\w-])")  # "reclining seats seats"
    for session in all_sessions:
        for turn in session.turns:
            assert not doubled.search(turn["content"]), turn["content"]


def test_invented_titles_spell_their_plurals() -> None:
    titles = {title(random.Random(seed)) for seed in range(2000)}
    misspelt = [t for t in titles if re.search(r"(?:xs|sss|[^aeiou]ys)\b", t)]
    assert not misspelt, misspelt[:5]


def test_favourites_no_generic_frame_fits_are_said_in_their_own_words() -> None:
    """No "I've stuck with WiFi since December", no "I got into classmates after a friend recommended it"."""
    generic = re.compile(
        r"stuck with|go-to is still|whenever I can|after a friend recommended it|"
        r"a while ago and I'm still on it|for me\b|a favorite of mine for years"
    )
    said = 0
    for persona in load_users(*(f"user{i}" for i in range(30))):
        for affinity in persona.affinities:
            voice = Voice([affinity], persona.demographics, affinity.domain, Setting())
            if not voice.attributes or voice.attributes[0][0].noun not in {
                "amenities",
                "contacts",
                "destinations",
                "cuisines",
            }:
                continue
            rng = random.Random(0)
            for _ in range(40):
                remark = voice.preference(rng)
                said += 1
                assert not generic.search(remark), remark
    assert said >= 200


def test_requests_read_from_task_descriptions_are_whole_and_agree() -> None:
    """'research and comparing ... specific companies I are' was read from 'researching and comparing ... they are ...'."""
    activity = (
        "The user is interested in researching and comparing the performance of specific "
        "companies they are considering investing in."
    )
    assert parse_topic(activity, Domain.FINANCE).request == (
        "research and compare the performance of specific companies"
    )
    broken = re.compile(
        r"\b(?:I|you) (?:are|were)\b|\b(?:I|you|I am|you are)$|^\w+ing\b|^\w+ and \w+ing\b"
    )
    requests = [
        parse_topic(scenario.activity, scenario.domains[0]).request
        for persona in load_users(*(f"user{i}" for i in range(30)))
        for scenario in task_scenarios(persona.tasks)
    ]
    assert len(requests) >= 300
    assert not [r for r in requests if broken.search(r)]


def test_articles_follow_the_words_filled_in_after_them(all_sessions: tuple[Session, ...]) -> None:
    for session in all_sessions:
        for turn in session.turns:
            assert fix_articles(turn["content"]) == turn["content"], turn["content"]


def test_user_turns_are_personal_without_pasting_the_interaction_summary(
    all_sessions: tuple[Session, ...],
) -> None:
    personal = 0
    total = 0
    for session in all_sessions:
        domain = Domain(session.event["domain"])
        summary = PersonaMaterial(
            session.persona.demographics, [], session.persona.interactions, []
        ).interaction(domain)
        pasted = {
            normalise_text(s)
            for s in interaction_sentences(summary, "first")
            + interaction_sentences(summary, "second")
        }
        for turn in session.turns:
            for sentence in split_sentences(turn["content"]):
                assert normalise_text(sentence) not in pasted, sentence
                assert not re.search(r"\bthe (?:virtual )?assistant\b", sentence, re.IGNORECASE), (
                    sentence
                )
            if turn["role"] == "user":
                total += 1
                personal += bool(re.search(r"\b(?:I|I'm|I've|my|My)\b", turn["content"]))
    assert personal / total > 0.8


def test_sentences_rarely_repeat_for_one_user(all_sessions: tuple[Session, ...]) -> None:
    by_user: dict[str, Counter[str]] = {}
    for session in all_sessions:
        counter = by_user.setdefault(session.persona.persona_id, Counter())
        for turn in session.turns:
            counter.update(normalise_text(s) for s in split_sentences(turn["content"]))
    for counter in by_user.values():
        total = sum(counter.values())
        repeated = sum(c for c in counter.values() if c >= 5)
        assert repeated / total < 0.2
    closings = Counter(_first_sentence(s.turns[-1]["content"]) for s in all_sessions)
    assert len(closings) > 0.5 * len(all_sessions)


def test_the_same_request_gives_the_same_conversation(all_sessions: tuple[Session, ...]) -> None:
    session = all_sessions[0]
    settings = GenerationSettings()
    variables = _dialogue_variables(session.persona, session.event, session.news, settings)
    assert simulate("dialogue_expansion", variables, seed=0) == simulate(
        "dialogue_expansion", variables, seed=0
    )
    assert simulate("dialogue_expansion", variables, seed=0) != simulate(
        "dialogue_expansion", variables, seed=1
    )


# --------------------------------------------------------------------------- memory of the conversations


def test_every_reference_sentence_yields_a_fact_quoting_it(
    all_sessions: tuple[Session, ...],
) -> None:
    for session in all_sessions:
        if session.reference is None:
            continue
        index, said = session.reference_said
        facts = facts_of_turn(
            session.turns[index]["content"], session.event["domain"], opening=index == 0
        )
        quoted = [f for f in facts if f[0] == said]
        assert quoted, (said, session.turns[index]["content"])
        for _, info, _, entities in facts:
            assert ";" not in info
            assert not any(re.search(r"\bI\b|\bI'm\b", e) for e in entities), entities


def test_facts_of_every_user_turn_are_atomic_quoted_sentences(
    all_sessions: tuple[Session, ...],
) -> None:
    count = 0
    for session in all_sessions:
        for index, turn in enumerate(session.turns):
            if turn["role"] != "user":
                continue
            sentences = split_sentences(turn["content"])
            for quote, info, fact_type, entities in facts_of_turn(
                turn["content"], session.event["domain"], opening=index == 0
            ):
                count += 1
                assert quote in sentences
                assert ";" not in info and info[:1].isupper()
                assert not re.match(r"^(?:I|My|I'm)\b", info), info
                assert fact_type in {
                    "Identity",
                    "Preference",
                    "Goal",
                    "Interest",
                    "Activity",
                    "Event",
                }
                for entity in entities:
                    assert not re.search(r"\b(?:I|I'm|I've|my|me)\b", entity), entity
    assert count > 1000


def test_timelines_keep_distractors_off_the_references_needs(
    all_sessions: tuple[Session, ...],
) -> None:
    seen = 0
    for session in all_sessions:
        if session.reference is not None:
            continue
        reference_needs = {classify_need(r["text"]) for r in session.query["references"]} - {None}
        updates = session.event["news"]
        for update in updates:
            seen += 1
            assert classify_need(update) not in reference_needs, (update, reference_needs)
    assert seen > 50
