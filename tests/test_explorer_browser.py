"""The published explorer in a real headless Chromium, opened from disk (file://).

The browser is driven through Playwright's Python API with ``executable_path``:
``MEMORYQUEST_CHROMIUM``, else a system Chromium (Debian's ``chromium``), else
Playwright's own download. ``make test`` provides one
(``scripts/ensure-browser.sh``); when none is there these tests fail and say
what to install.

Screenshots and load timings are kept under ``output/test-artifacts/``
(override with ``MEMORYQUEST_TEST_ARTIFACTS``).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from memoryquest.contracts import Query, Session
from memoryquest.dataset import GeneratedDataset
from memoryquest.publish.explorer import EXPLORER_DIR, write_explorer

try:
    from tests.test_explorer_data import (
        EMOJI_LEAD,
        HOSTILE,
        explorer_dataset,
        publish,
        recorded_audit,
    )
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from test_explorer_data import EMOJI_LEAD, HOSTILE, explorer_dataset, publish, recorded_audit

try:
    from tests.generated_dataset_fixture import card_figures
    from tests.test_explorer_data import read_index
except ModuleNotFoundError:
    from generated_dataset_fixture import card_figures
    from test_explorer_data import read_index

pytestmark = pytest.mark.browser

REPO_ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = Path(
    os.environ.get("MEMORYQUEST_TEST_ARTIFACTS", REPO_ROOT / "output" / "test-artifacts")
)
VIEWPORT = {"width": 1500, "height": 950}


def chromium_path(playwright_chromium: str) -> str:
    """The browser to launch; ``playwright_chromium`` is where Playwright's own download would be.

    Same order as ``scripts/ensure-browser.sh`` looks.
    """
    found = (
        os.environ.get("MEMORYQUEST_CHROMIUM")
        or shutil.which("chromium")
        or shutil.which("chromium-browser")
    )
    if found is None:
        found = next(
            (p for p in ("/usr/bin/chromium", playwright_chromium) if Path(p).is_file()), None
        )
    if found is None:
        pytest.fail(
            "Chromium is not installed: `make test` installs it, or `apt-get install -y chromium`"
            " (Debian), or `.venv/bin/python -m playwright install chromium`,"
            " or set MEMORYQUEST_CHROMIUM"
        )
    return found


@pytest.fixture(scope="module")
def dataset() -> GeneratedDataset:
    return explorer_dataset()


@pytest.fixture(scope="module")
def published(dataset: GeneratedDataset, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return publish(dataset, tmp_path_factory.mktemp("published") / "memoryquest")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=chromium_path(playwright.chromium.executable_path),
            args=["--no-sandbox"],
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser, published: Path) -> Iterator[Page]:
    """A fresh page on the edge-case explorer; fails the test on any script error or console error."""
    yield from open_explorer(browser, published)


@pytest.fixture
def generated_page(browser: Browser, published_generated: Path) -> Iterator[Page]:
    """A fresh page on the explorer of the pipeline's own output (tests/generated_dataset_fixture.py)."""
    yield from open_explorer(browser, published_generated)


def open_explorer(browser: Browser, published: Path) -> Iterator[Page]:
    """The explorer's persona list in a new context; after the test, no script or console error."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on(
        "console",
        lambda message: (
            problems.append(f"console {message.type}: {message.text}")
            if message.type == "error"
            else None
        ),
    )
    page.goto(entry_url(published))
    page.wait_for_selector("#persona-list a.persona-link")
    yield page
    context.close()
    assert problems == []


def entry_url(published: Path) -> str:
    return (published / EXPLORER_DIR / "index.html").as_uri()


def artifact(name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name


def reference_sessions(dataset: GeneratedDataset, persona_id: str) -> list[Session]:
    return [s for s in dataset.sessions if s.persona_id == persona_id and s.reference_spans]


def wait_for_session(page: Page, session_id: str) -> None:
    """Wait until the pane shows this session: the previous session's marks stay until it re-renders."""
    page.locator("#session-pane p.mono", has_text=session_id).wait_for()


def expected_sentence(session: Session) -> str:
    span = session.reference_spans[0]
    return session.turns[span.turn_index].content[span.start : span.end]


def test_click_through_persona_query_reference_session(
    page: Page, dataset: GeneratedDataset
) -> None:
    """Persona → query → a reference's session: the highlighted sentence is the recorded span."""
    session = next(
        s
        for s in dataset.sessions
        if s.reference_spans
        and s.turns[s.reference_spans[0].turn_index].content.startswith(EMOJI_LEAD)
    )
    query = next(q for q in dataset.queries if q.query_id == session.query_id)
    persona = next(p for p in dataset.personas if p.persona_id == session.persona_id)

    page.click(f'#persona-list a[data-persona-id="{persona.persona_id}"]')
    page.wait_for_selector(f'tr.query-row[data-query-id="{query.query_id}"]')
    assert page.locator("article.persona h2").inner_text().startswith(persona.source_user_id)

    page.click(f'a.query-link[data-query-id="{query.query_id}"]')
    page.wait_for_selector(f'section.query[data-query-id="{query.query_id}"]')
    references = page.locator("tr.reference-row")
    assert references.count() == len(query.references)
    assert page.locator("ol.timeline li.event:not(.query-date)").count() == len(
        next(t for t in dataset.timelines if t.query_id == query.query_id).events
    )

    page.click(f'a.session-link[data-reference-id="{session.reference_id}"]')
    wait_for_session(page, session.session_id)
    mark = page.locator("#session-pane mark.ref-span")
    mark.wait_for()
    span = session.reference_spans[0]
    assert mark.count() == 1
    assert mark.inner_text() == expected_sentence(session)
    assert mark.text_content() == session.turns[span.turn_index].content[span.start : span.end]
    turn = page.locator(f'#session-pane li.turn[data-turn-index="{span.turn_index}"]')
    assert turn.locator("mark.ref-span").count() == 1
    assert turn.locator(".turn-content").text_content() == session.turns[span.turn_index].content
    # the facts extracted from the session, the credited one marked
    facts = [f for f in dataset.facts if session.session_id in f.session_ids]
    assert page.locator("#session-pane ul.session-facts li.fact").count() == len(facts)
    credited = [f for f in facts if session.reference_id in f.source_reference_ids]
    assert page.locator("#session-pane li.fact.credits-this").count() == len(credited) > 0

    page.screenshot(path=str(artifact("explorer-session.png")))


def test_every_reference_span_is_highlighted_exactly(
    page: Page, dataset: GeneratedDataset, published: Path
) -> None:
    persona = dataset.personas[0].persona_id
    sessions = reference_sessions(dataset, persona)
    assert sessions
    for session in sessions:
        page.goto(f"{entry_url(published)}#p={persona}&q={session.query_id}&s={session.session_id}")
        wait_for_session(page, session.session_id)
        mark = page.locator("#session-pane mark.ref-span")
        mark.wait_for()
        assert mark.text_content() == expected_sentence(session), session.session_id


def test_retrieval_shows_each_methods_facts_and_covered_references(
    page: Page, dataset: GeneratedDataset, published: Path
) -> None:
    check_retrieval(page, dataset, published, dataset.queries[1])


def check_retrieval(page: Page, dataset: GeneratedDataset, published: Path, query: Query) -> None:
    """Each method's retrieved facts in order, the supporting ones marked, the found references counted."""
    page.goto(f"{entry_url(published)}#p={query.persona_id}&q={query.query_id}")
    page.wait_for_selector("table.retrieval")
    rows = [
        v
        for v in dataset.validation
        if v.query_id == query.query_id and v.judge.value == "provenance"
    ]
    for row in rows:
        # a budget-matched baseline is shown as "<baseline>@<method>"
        key = row.method.value + (f"@{row.baseline_for.value}" if row.baseline_for else "")
        details = page.locator(f'details.retrieved[data-method="{key}"]')
        listed = details.locator("ol.fact-list > li.fact")
        assert listed.count() == len(row.retrieved_fids)
        assert [
            listed.nth(i).get_attribute("data-fact-id") for i in range(listed.count())
        ] == row.retrieved_fids
        supporting = {fid for j in row.judgements for fid in j.supporting_fids}
        assert details.locator("li.fact.supports").count() == len(supporting)
        cells = page.locator(f'table.retrieval tr[data-method="{key}"] td.found')
        assert cells.count() == sum(j.found for j in row.judgements)
    assert rows
    # switching the judge re-renders with that judge's verdicts
    page.select_option("#judge", "embedding")
    page.wait_for_selector("text=Retrieval (embedding judge)")


def test_persona_data_loads_only_when_opened(page: Page, dataset: GeneratedDataset) -> None:
    scripts = "Array.from(document.querySelectorAll('script[src^=\"data/\"]'), s => s.getAttribute('src'))"
    assert page.evaluate(scripts) == ["data/index.js"]
    second = dataset.personas[1].persona_id
    page.click(f'#persona-list a[data-persona-id="{second}"]')
    page.wait_for_selector(f'article.persona[data-persona-id="{second}"]')
    assert sorted(page.evaluate(scripts)) == sorted(["data/index.js", f"data/{second}.js"])


def test_data_is_shown_as_text_never_as_markup(
    page: Page, dataset: GeneratedDataset, published: Path
) -> None:
    query = dataset.queries[0]
    assert HOSTILE in query.text
    page.goto(f"{entry_url(published)}#p={query.persona_id}&q={query.query_id}")
    page.wait_for_selector("blockquote.request-text")
    assert page.locator("blockquote.request-text").text_content() == query.text
    hostile = next(s for s in dataset.sessions if any(HOSTILE in t.content for t in s.turns))
    page.goto(
        f"{entry_url(published)}#p={hostile.persona_id}&q={hostile.query_id}&s={hostile.session_id}"
    )
    page.wait_for_selector("#session-pane li.turn")
    assert (
        page.locator("#session-pane li.turn .turn-content").first.text_content()
        == hostile.turns[0].content
    )
    page.goto(f"{entry_url(published)}#view=audit")
    page.wait_for_selector("table.checks")
    assert page.evaluate("document.querySelectorAll('img[src=\"x\"], [data-xss]').length") == 0
    assert page.evaluate("window.__xss === undefined") is True


def test_audit_beside_the_plots(page: Page, published: Path) -> None:
    audit = recorded_audit(published)
    page.click("#tab-audit")
    page.wait_for_selector("table.checks")
    assert page.locator("table.checks tbody tr").count() == len(audit["checks"])
    failed = [c for c in audit["checks"] if c["threshold"] is not None and not c["passed"]]
    missed = [c for c in audit["checks"] if c.get("on_target") is False]
    assert page.locator("table.checks tr.fail").count() == len(failed) + len(missed)
    verdict = page.locator("p.verdict").first
    assert verdict.get_attribute("class") == ("verdict pass" if audit["passed"] else "verdict fail")
    targets = page.locator("p.verdict", has_text="Benchmark targets missed")
    assert targets.count() == (1 if audit["targets_missed"] else 0)
    images = page.locator(".plots img")
    assert images.count() == 2
    for i in range(2):
        images.nth(i).scroll_into_view_if_needed()
        page.wait_for_function(
            "img => img.complete && img.naturalWidth > 0", arg=images.nth(i).element_handle()
        )
    page.screenshot(path=str(artifact("explorer-audit.png")), full_page=True)


def measure_load(browser: Browser, explorer: Path, persona_id: str) -> dict[str, float]:
    """Milliseconds to the persona list (first contentful paint, index rendered) and to open one persona."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    started = time.perf_counter()
    page.goto((explorer / "index.html").as_uri())
    page.wait_for_selector("#persona-list a.persona-link")
    list_wall = time.perf_counter() - started
    started = time.perf_counter()
    page.click(f'#persona-list a[data-persona-id="{persona_id}"]')
    page.wait_for_selector(f'article.persona[data-persona-id="{persona_id}"]')
    persona_wall = time.perf_counter() - started
    marks = page.evaluate(
        "Object.fromEntries(performance.getEntriesByType('mark').map(m => [m.name.split(':')[0], m.startTime]))"
    )
    paint = page.evaluate(
        "Object.fromEntries(performance.getEntriesByType('paint').map(p => [p.name, p.startTime]))"
    )
    context.close()
    return {
        "first_contentful_paint_ms": round(paint["first-contentful-paint"], 1),
        "persona_list_rendered_ms": round(marks["mqx-index-rendered"], 1),
        "persona_list_wall_ms": round(list_wall * 1000, 1),
        "open_persona_ms": round(marks["mqx-persona-rendered"] - marks["mqx-persona-requested"], 1),
        "open_persona_wall_ms": round(persona_wall * 1000, 1),
    }


def test_load_timings(browser: Browser, published: Path, dataset: GeneratedDataset) -> None:
    """Load timings, kept as an artifact (the bounds are generous: this is a record, not a benchmark)."""
    timings = measure_load(browser, published / EXPLORER_DIR, dataset.personas[0].persona_id)
    record = {"personas": len(dataset.personas), **timings}
    artifact("explorer-timings.json").write_text(
        json.dumps(record, indent=2) + "\n", encoding="utf-8"
    )
    assert timings["persona_list_rendered_ms"] < 10_000 and timings["open_persona_ms"] < 10_000


def test_a_partial_dataset_renders_without_errors(
    browser: Browser, dataset: GeneratedDataset, tmp_path: Path
) -> None:
    """No validation, timelines, sessions, manifest or plots: every view still renders, without script errors."""
    persona = dataset.personas[0].persona_id
    partial = GeneratedDataset(
        personas=dataset.personas[:1],
        queries=[q for q in dataset.queries if q.persona_id == persona],
    )
    write_explorer(partial, tmp_path / "explorer")
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    url = (tmp_path / "explorer" / "index.html").as_uri()
    page.goto(f"{url}#p={persona}&q={partial.queries[0].query_id}")
    page.wait_for_selector("section.query")
    assert page.locator("text=No validation results for this query.").count() == 1
    page.goto(f"{url}#view=audit")
    page.wait_for_selector("text=records no audit")
    page.goto(f"{url}#p=p_0000000000000000")
    page.wait_for_selector("text=There is no persona p_0000000000000000 in this dataset.")
    context.close()
    assert errors == []


# --------------------------------------------------------------------------- generated data


def test_the_overview_shows_the_figures_the_card_states(
    generated_page: Page, published_generated: Path
) -> None:
    """The pipeline's own output: totals and each method's recall per judge, as the card prints them."""
    page = generated_page
    card = card_figures(published_generated)
    assert (
        page.locator("#run")
        .inner_text()
        .startswith(
            f"{card.users} personas · {card.queries} queries · {card.sessions} sessions"
            f" · {card.facts} facts · "
        )
    )
    assert page.locator("#persona-count").inner_text() == (
        f"{card.users} of {card.users} personas · {card.queries} queries"
    )
    assert page.locator("#persona-list a.persona-link").count() == card.users
    methods = read_index(published_generated / EXPLORER_DIR)["methods"]
    judges = sorted({judge for _, judge in card.recall})
    assert judges == ["embedding", "provenance"]
    for judge in judges:
        page.select_option("#judge", judge)
        table = page.locator("table.grid", has_text=f"Mean recall per method ({judge} judge)")
        table.wait_for()
        shown = [
            [cell.inner_text() for cell in row.locator("th, td").all()]
            for row in table.locator("tbody tr").all()
        ]
        expected = []
        for method in methods:
            if method["baseline_for"] is None:
                queries, recall = card.recall[method["method"], judge]
            else:
                queries, recall = card.baseline_recall[
                    method["method"], method["baseline_for"], judge
                ]
            expected.append([method["label"], str(queries), recall])
        assert shown == expected, judge
        # every row of the card's tables for this judge is on the page
        assert {m["method"] for m in methods if m["baseline_for"] is None} == {
            method for method, j in card.recall if j == judge
        }
        assert {(m["method"], m["baseline_for"]) for m in methods if m["baseline_for"]} == {
            (baseline, method) for baseline, method, j in card.baseline_recall if j == judge
        }
    page.screenshot(path=str(artifact("explorer-generated-overview.png")))


def test_a_generated_query_through_to_its_sessions_and_retrieval(
    generated_page: Page, generated_dataset: GeneratedDataset, published_generated: Path
) -> None:
    """Persona → query → each reference's session, its recorded span highlighted; then retrieval."""
    page = generated_page
    query = generated_dataset.queries[0]
    persona = next(p for p in generated_dataset.personas if p.persona_id == query.persona_id)
    page.click(f'#persona-list a[data-persona-id="{persona.persona_id}"]')
    page.wait_for_selector(f'tr.query-row[data-query-id="{query.query_id}"]')
    assert page.locator("article.persona h2").inner_text().startswith(persona.source_user_id)
    page.click(f'a.query-link[data-query-id="{query.query_id}"]')
    page.wait_for_selector(f'section.query[data-query-id="{query.query_id}"]')
    assert page.locator("tr.reference-row").count() == len(query.references)
    assert page.locator("ol.timeline li.event:not(.query-date)").count() == len(
        next(t for t in generated_dataset.timelines if t.query_id == query.query_id).events
    )
    sessions = [s for s in generated_dataset.sessions if s.query_id == query.query_id]
    carrying = [s for s in sessions if s.reference_spans]
    assert {s.reference_id for s in carrying} == {r.reference_id for r in query.references}
    for session in carrying:
        page.click(f'a.session-link[data-reference-id="{session.reference_id}"]')
        wait_for_session(page, session.session_id)
        mark = page.locator("#session-pane mark.ref-span")
        assert mark.count() == len(session.reference_spans), session.session_id
        assert [mark.nth(i).text_content() for i in range(mark.count())] == [
            session.turns[span.turn_index].content[span.start : span.end]
            for span in session.reference_spans
        ]
        facts = [f for f in generated_dataset.facts if session.session_id in f.session_ids]
        assert page.locator("#session-pane ul.session-facts li.fact").count() == len(facts)
    page.screenshot(path=str(artifact("explorer-generated-session.png")))
    check_retrieval(page, generated_dataset, published_generated, query)


def test_the_generated_audit_beside_the_plots(
    generated_page: Page, published_generated: Path
) -> None:
    """The audit publish ran on the generated dataset (the card says it failed) is the one shown."""
    page = generated_page
    audit = recorded_audit(published_generated)
    card = (published_generated / "README.md").read_text(encoding="utf-8")
    assert ("The dataset passed `memoryquest audit`" in card) is audit["passed"]
    page.click("#tab-audit")
    page.wait_for_selector("table.checks")
    assert page.locator("table.checks tbody tr").count() == len(audit["checks"])
    failed = [c for c in audit["checks"] if c["threshold"] is not None and not c["passed"]]
    missed = [c for c in audit["checks"] if c.get("on_target") is False]
    assert page.locator("table.checks tr.fail").count() == len(failed) + len(missed)
    verdict = page.locator("p.verdict").first
    assert verdict.get_attribute("class") == ("verdict pass" if audit["passed"] else "verdict fail")
    assert page.locator(".plots img").count() == 2
