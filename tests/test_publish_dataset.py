from __future__ import annotations

import json
import random
import shutil
import struct
import zlib
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from pydantic import SecretStr

from memoryquest.cli.main import main
from memoryquest.contracts import READABLE_TABLES, TABLES, RetrievalMethod, Turn
from memoryquest.dataset import DATASET_TABLES, GeneratedDataset, ReadableDataset
from memoryquest.pgr.winrate_contracts import WinRateReport
from memoryquest.publish import (
    PRIMARY_KEYS,
    WIN_RATE_FILE,
    AuditFailedError,
    PublishError,
    load_published,
    load_readable,
    publish_dataset,
)
from memoryquest.publish import plots as publish_plots
from memoryquest.publish.parquet import sha256_file
from memoryquest.publish.splits import SPLITS
from memoryquest.settings import AuditSettings, Settings

try:
    from tests.publish_fixture import build_publish_fixture
    from tests.test_explorer_data import read_index
    from tests.test_publish_card import judged_report, with_baselines
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from publish_fixture import build_publish_fixture
    from test_explorer_data import read_index
    from test_publish_card import judged_report, with_baselines

SECRET = "sk-test-DO-NOT-PUBLISH-7f3a9c1e5b"


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n", 2)[1])


def _by_id(dataset: GeneratedDataset, name: str) -> dict[str, object]:
    key = PRIMARY_KEYS.get(name, "session_id")  # the joined view's sessions: history + labels
    return {getattr(row, key): row for row in getattr(dataset, name)}


@pytest.fixture(scope="module")
def dataset(generated_dataset: GeneratedDataset) -> GeneratedDataset:
    """The pipeline's own output for three bundled users (tests/generated_dataset_fixture.py)."""
    return generated_dataset.model_copy(deep=True)


@pytest.fixture(scope="module")
def published(published_generated: Path) -> Path:
    """``dataset`` published once per session (tests copy it before writing)."""
    return published_generated


@pytest.fixture(scope="module")
def handmade() -> GeneratedDataset:
    """Six users, three queries each, every reference after the same marker words: for the tests
    that expect a known shape (split sizes, counts on the card, rejections of every reason, a
    marker the audit catches) that three generated users cannot give."""
    return build_publish_fixture(users=6, queries_per_user=3)


@pytest.fixture(scope="module")
def handmade_published(
    handmade: GeneratedDataset, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    destination = tmp_path_factory.mktemp("handmade") / "memoryquest"
    publish_dataset(handmade, destination, Settings(), allow_failed_audit=True)
    return destination


def test_layout_follows_hugging_face_conventions(published: Path) -> None:
    names = set(_files(published))
    assert {
        "README.md",
        "manifest.json",
        "LICENSE.md",
        "plots/gamma_histogram.png",
        "plots/recall_by_method.png",
    } <= names
    for config in TABLES:
        for split in SPLITS:
            assert f"data/{config}/{split}-00000-of-00001.parquet" in names
            assert f"jsonl/{config}/{split}.jsonl" in names
    # nothing else next to the destination: no staging or backup directories left over
    assert [p.name for p in published.parent.iterdir()] == ["memoryquest"]


def test_rows_are_sorted_and_carry_schema_version(published: Path) -> None:
    for config in TABLES:
        for split in SPLITS:
            table = pq.read_table(published / "data" / config / f"{split}-00000-of-00001.parquet")
            ids = table.column(PRIMARY_KEYS[config]).to_pylist()
            assert len(set(ids)) == len(ids)
            if config == "history":  # each user's sessions by date, ties by session id
                order = list(
                    zip(
                        *(
                            table.column(c).to_pylist()
                            for c in ("persona_id", "date", "session_id")
                        ),
                        strict=True,
                    )
                )
                assert order == sorted(order)
            else:
                assert ids == sorted(ids)
            assert set(table.column("schema_version").to_pylist()) == {"1.0"}
            assert table.schema.metadata[b"schema_version"] == b"1.0"
            assert table.schema.metadata[b"table"] == config.encode()


def test_no_user_in_two_splits_in_any_table(
    handmade_published: Path, handmade: GeneratedDataset
) -> None:
    split_of: dict[str, str] = {}
    for config in TABLES:
        for split in SPLITS:
            table = pq.read_table(
                handmade_published / "data" / config / f"{split}-00000-of-00001.parquet",
                columns=["persona_id"],
            )
            for persona_id in table.column("persona_id").to_pylist():
                assert split_of.setdefault(persona_id, split) == split, (
                    f"{persona_id} is in two splits ({config})"
                )
    assert set(split_of) == {p.persona_id for p in handmade.personas}
    assert sorted(split_of.values()).count("train") == 4
    assert {s: list(split_of.values()).count(s) for s in SPLITS} == {
        "train": 4,
        "validation": 1,
        "test": 1,
    }


def test_publishing_twice_gives_identical_bytes(
    dataset: GeneratedDataset, published: Path, tmp_path: Path
) -> None:
    shuffled = dataset.model_copy(deep=True)
    rng = random.Random(7)
    for name in DATASET_TABLES:
        rng.shuffle(getattr(shuffled, name))
    again = tmp_path / "elsewhere" / "memoryquest-copy"
    publish_dataset(shuffled, again, Settings(), allow_failed_audit=True)
    first, second = _files(published), _files(again)
    assert first.keys() == second.keys()
    differing = [name for name in first if first[name] != second[name]]
    assert differing == []


def test_manifest_records_run_and_publish_info(
    handmade_published: Path, handmade: GeneratedDataset
) -> None:
    manifest = json.loads((handmade_published / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["simulated"] is True
    assert manifest["embedder"] == handmade.manifest.embedder
    assert manifest["settings"]["generation"]["gamma_max"] == 0.3
    assert manifest["settings"]["pgr"]["query_only_k"] == 20
    assert [p["template_id"] for p in manifest["prompts"]] == [
        p.template_id for p in handmade.manifest.prompts
    ]
    assert sum(u["input_tokens"] for u in manifest["usage"]) == sum(
        u.input_tokens for u in handmade.manifest.usage
    )
    publish = manifest["publish"]
    assert publish["ratios"] == {"train": 0.8, "validation": 0.1, "test": 0.1}
    assert publish["split_seed"] == 13
    assert publish["row_counts"]["queries"] == {"train": 12, "validation": 3, "test": 3}
    assert sum(publish["row_counts"]["history"].values()) == len(handmade.sessions)
    listed = {f["path"]: f for f in publish["files"]}
    on_disk = set(_files(handmade_published)) - {"manifest.json"}
    assert set(listed) == on_disk
    for relative, entry in listed.items():
        assert sha256_file(handmade_published / relative) == entry["sha256"]
        assert (handmade_published / relative).stat().st_size == entry["bytes"]


def test_card_has_configs_statistics_and_attribution(
    handmade_published: Path, handmade: GeneratedDataset
) -> None:
    card = (handmade_published / "README.md").read_text(encoding="utf-8")
    meta = _front_matter(card)
    assert meta["license"] == "cc-by-nc-4.0"
    assert "question-answering" in meta["task_categories"]
    assert meta["pretty_name"]
    configs = {c["config_name"]: c for c in meta["configs"]}
    assert set(configs) == set(TABLES)
    assert configs["queries"].get("default") is True
    for name, config in configs.items():
        assert config["data_files"] == [{"split": s, "path": f"data/{name}/{s}-*"} for s in SPLITS]
    body = card.split("---\n", 2)[2]
    assert "SIMULATED DATA" in body and "not from a language model" in body
    assert (
        f"6 users, 18 queries, {len(handmade.sessions)} sessions, {len(handmade.facts)} facts"
        in body
    )
    gammas = sorted(q.gamma for q in handmade.queries)
    assert f"| γ (mean query–reference cosine) | {gammas[0]:.3f} |" in body
    assert (
        "| references per query |" in body
        and "| turns per session |" in body
        and "| sessions per user |" in body
    )
    assert "| similarity | 6 |" in body and "| schema | 6 |" in body
    for method in ("query_only", "pgr_cot", "pgr_tot"):
        assert f"| `{method}` | `provenance` | 18 |" in body
    assert (
        "PersonaLens" in body
        and "Findings of ACL 2025" in body
        and "amazon-science/PersonaLens" in body
    )
    assert "CC BY-NC 4.0" in body
    assert "Chopra" in body and "2605.14177" in body and "@misc{" in body
    assert "![Histogram of γ with the threshold](plots/gamma_histogram.png)" in body
    assert "![Recall and RecallExact by method and judge](plots/recall_by_method.png)" in body
    assert "reference_id" in body and "reference_turn_indices" in body
    assert (
        'load_dataset("parquet", data_dir=' in body
        and "read_parquet" in body
        and "pl.read_parquet" in body
    )
    for name in TABLES:
        assert f"<code>{name}</code>" in body
    readable = body.split("## What a system under test may read", 1)[1].split("\n## ", 1)[0]
    for name in TABLES:
        assert (f"`{name}`" in readable.split("Ground truth")[0]) == (name in READABLE_TABLES), name


def test_the_history_config_has_exactly_persona_session_date_and_turns(published: Path) -> None:
    for split in SPLITS:
        table = pq.read_table(published / "data" / "history" / f"{split}-00000-of-00001.parquet")
        assert table.column_names == ["schema_version", "persona_id", "session_id", "date", "turns"]
        first = json.loads(
            (published / "jsonl" / "history" / f"{split}.jsonl").read_text().splitlines()[0]
        )
        assert list(first) == table.column_names
    for config in READABLE_TABLES:
        names = pq.read_table(
            published / "data" / config / "train-00000-of-00001.parquet"
        ).column_names
        assert not {"reference_id", "source_reference_ids", "references", "event_id"} & set(names)
    facts = pq.read_table(published / "data" / "facts" / "train-00000-of-00001.parquet")
    assert "source_reference_ids" not in str(facts.schema)


def test_load_readable_opens_no_labels_config(
    published: Path, dataset: GeneratedDataset, tmp_path: Path
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(published, copy)
    for config in TABLES:
        if config not in READABLE_TABLES:
            shutil.rmtree(copy / "data" / config)
    readable = load_readable(copy)
    expected = ReadableDataset.of(dataset)
    assert len(readable.history) == len(expected.history) == len(dataset.sessions)
    assert sorted(readable.history, key=lambda s: s.session_id) == sorted(
        expected.history, key=lambda s: s.session_id
    )
    assert {q.query_id for q in readable.queries} == {q.query_id for q in dataset.queries}
    assert {f.fid for f in readable.facts} == {f.fid for f in dataset.facts}
    with pytest.raises(PublishError, match="listed in manifest.json but missing"):
        load_published(copy)


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    width, height = struct.unpack(">II", data[16:24])
    assert zlib.crc32(data[12:29]) == struct.unpack(">I", data[29:33])[0]
    return width, height


def test_plots_are_valid_pngs_without_timestamps(published: Path) -> None:
    import matplotlib.image

    for name in ("gamma_histogram.png", "recall_by_method.png"):
        path = published / "plots" / name
        data = path.read_bytes()
        assert _png_size(data) == (640, 360)
        assert b"tEXt" not in data and b"tIME" not in data
        pixels = matplotlib.image.imread(path)
        assert pixels.shape[:2] == (360, 640)
        assert pixels.std() > 0.05  # something was drawn


def test_load_published_round_trips(published: Path, dataset: GeneratedDataset) -> None:
    loaded = load_published(published)
    for name in DATASET_TABLES:
        assert _by_id(loaded, name) == _by_id(dataset, name), name
        assert len(getattr(loaded, name)) == len(getattr(dataset, name))
    assert (
        loaded.manifest is not None and loaded.manifest.audit is not None
    )  # publish adds the audit
    assert loaded.manifest.model_copy(update={"audit": None}) == dataset.manifest


def test_load_published_detects_tampering(published: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(published, copy)
    target = copy / "data" / "queries" / "train-00000-of-00001.parquet"
    target.write_bytes(target.read_bytes()[:-100])
    with pytest.raises(
        PublishError, match="queries/train-00000-of-00001.parquet does not match its sha256"
    ):
        load_published(copy)
    with pytest.raises(PublishError, match="not a published dataset"):
        load_published(tmp_path)


def test_crash_midway_keeps_previous_dataset(
    dataset: GeneratedDataset, published: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    destination = tmp_path / "out"
    shutil.copytree(published, destination)  # an earlier publish
    before = _files(destination)

    def broken(*args: object, **kwargs: object) -> Path:
        raise OSError("disk full while drawing")

    monkeypatch.setattr(publish_plots, "recall_by_method", broken)
    changed = dataset.model_copy(deep=True)
    changed.queries = changed.queries[:5]
    with pytest.raises(OSError, match="disk full"):
        publish_dataset(changed, destination, Settings(), allow_failed_audit=True)
    assert _files(destination) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]

    fresh = tmp_path / "never"
    with pytest.raises(OSError, match="disk full"):
        publish_dataset(changed, fresh, Settings(), allow_failed_audit=True)
    assert not fresh.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_republishing_replaces_the_previous_dataset(
    dataset: GeneratedDataset, published: Path, tmp_path: Path
) -> None:
    destination = tmp_path / "out"
    shutil.copytree(published, destination)  # an earlier publish
    smaller = dataset.model_copy(deep=True)
    smaller.rejected = []
    publish_dataset(smaller, destination, Settings(), allow_failed_audit=True)
    assert not (destination / "data" / "rejected").exists()
    meta = _front_matter((destination / "README.md").read_text(encoding="utf-8"))
    assert "rejected" not in {c["config_name"] for c in meta["configs"]}
    assert load_published(destination).rejected == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_refuses_to_replace_a_directory_that_is_not_a_published_dataset(
    dataset: GeneratedDataset, tmp_path: Path
) -> None:
    precious = tmp_path / "home"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(PublishError, match="not a published dataset"):
        publish_dataset(dataset, precious, Settings(), allow_failed_audit=True)
    assert (precious / "notes.txt").read_text(encoding="utf-8") == "keep me"
    dataset.save(tmp_path / "generated")  # a generator output is not a published dataset either
    with pytest.raises(PublishError, match="refusing to replace"):
        publish_dataset(dataset, tmp_path / "generated", Settings(), allow_failed_audit=True)


def test_missing_manifest_is_a_clear_error(dataset: GeneratedDataset, tmp_path: Path) -> None:
    bare = dataset.model_copy(update={"manifest": None})
    with pytest.raises(PublishError, match="no run manifest"):
        publish_dataset(bare, tmp_path / "out", Settings(), allow_failed_audit=True)
    assert not (tmp_path / "out").exists()


def test_empty_splits_are_left_out(tmp_path: Path) -> None:
    small = build_publish_fixture(users=2, queries_per_user=1)
    report = publish_dataset(small, tmp_path / "out", Settings(), allow_failed_audit=True)
    assert report.row_counts["personas"] == {"train": 1, "validation": 1, "test": 0}
    assert not list((tmp_path / "out").rglob("test-*.parquet"))
    assert not list((tmp_path / "out").rglob("test.jsonl"))
    meta = _front_matter(report.card.read_text(encoding="utf-8"))
    for config in meta["configs"]:
        assert [f["split"] for f in config["data_files"]] == ["train", "validation"]


def test_non_simulated_card_names_model_and_endpoint(
    dataset: GeneratedDataset, tmp_path: Path
) -> None:
    real = dataset.model_copy(deep=True)
    assert real.manifest is not None
    real.manifest = real.manifest.model_copy(
        update={
            "simulated": False,
            "backend": "openai",
            "chat_model": "gpt-4o",
            "base_url": "https://llm.example.org/v1",
        }
    )
    report = publish_dataset(real, tmp_path / "out", Settings(), allow_failed_audit=True)
    card = report.card.read_text(encoding="utf-8")
    assert "SIMULATED" not in card
    assert "chat model `gpt-4o` via `openai` at https://llm.example.org/v1" in card
    assert "simulated" not in _front_matter(card)["tags"]


def test_secrets_never_reach_the_output(dataset: GeneratedDataset, tmp_path: Path) -> None:
    settings = Settings(
        endpoint={"api_key": SecretStr(SECRET), "base_url": "https://llm.example.org/v1"}
    )
    leaky = dataset.model_copy(deep=True)
    assert leaky.manifest is not None
    run_settings = json.loads(json.dumps(leaky.manifest.settings))
    run_settings["endpoint"]["api_key"] = SECRET  # a generator that forgot to mask it
    run_settings["endpoint"]["extra_headers"] = {"Authorization": f"Bearer {SECRET}"}
    leaky.manifest = leaky.manifest.model_copy(
        update={
            "settings": run_settings,
            "base_url": f"https://user:{SECRET}@llm.example.org/v1?api-key={SECRET}&deployment=x",
        }
    )
    report = publish_dataset(leaky, tmp_path / "out", settings, allow_failed_audit=True)
    for relative, content in _files(report.destination).items():
        assert SECRET.encode() not in content, relative
        if relative.endswith(".parquet"):
            assert SECRET not in str(pq.read_table(report.destination / relative).to_pylist()), (
                relative
            )
    manifest = json.loads(report.manifest.read_text(encoding="utf-8"))
    assert manifest["settings"]["endpoint"]["api_key"] == "****"
    assert manifest["base_url"] == "https://llm.example.org/v1?api-key=****&deployment=x"
    assert (
        manifest["settings"]["limits"]["tokens_per_minute"]
        == dataset.manifest.settings["limits"]["tokens_per_minute"]
    )


def test_a_secret_inside_the_data_stops_publishing(
    dataset: GeneratedDataset, tmp_path: Path
) -> None:
    settings = Settings(endpoint={"api_key": SecretStr(SECRET)})
    leaky = dataset.model_copy(deep=True)
    leaky.sessions[0].turns.append(Turn(role="user", content=f"my key is {SECRET}"))
    with pytest.raises(PublishError, match=r"secret appears in (explorer/data|jsonl/sessions)"):
        publish_dataset(leaky, tmp_path / "out", settings, allow_failed_audit=True)
    assert list(tmp_path.iterdir()) == []


def test_cli_publish(
    handmade: GeneratedDataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = handmade.save(tmp_path / "generated")
    destination = tmp_path / "hub" / "memoryquest"
    assert (
        main(
            [
                "publish",
                str(source),
                "--output",
                str(destination),
                "--set",
                "publish.split_seed=5",
                "--allow-failed-audit",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert f"published to {destination}" in out
    assert f"dataset card: {destination / 'README.md'}" in out
    assert "queries" in out and "history" in out and "users: train 4  validation 1  test 1" in out
    manifest = json.loads((destination / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["publish"]["split_seed"] == 5
    printed = {
        line.split()[0]: line.split()[1:]
        for line in out.splitlines()
        if line.startswith("  ") and not line.strip().startswith("users:")
    }
    assert printed["config"] == list(SPLITS)
    for config, per_split in manifest["publish"]["row_counts"].items():
        assert printed[config] == [str(per_split[s]) for s in SPLITS]
    assert load_published(destination).queries

    # bad destination: clear error, exit code 2
    (tmp_path / "occupied").mkdir()
    (tmp_path / "occupied" / "file.txt").write_text("x", encoding="utf-8")
    assert main(["publish", str(source), "--output", str(tmp_path / "occupied")]) == 2
    assert "refusing to replace" in capsys.readouterr().err


def test_a_dataset_that_fails_its_audit_is_not_published(
    handmade: GeneratedDataset, tmp_path: Path
) -> None:
    # The fixture states every reference after the same words ("By the way, for context: ..."): a marker.
    with pytest.raises(
        AuditFailedError, match="exclusive_ngram: 'by the way for context'"
    ) as caught:
        publish_dataset(handmade, tmp_path / "out", Settings())
    assert not caught.value.report.passed
    assert list(tmp_path.iterdir()) == []


def test_publishing_a_failed_audit_anyway_says_so_first(published: Path) -> None:
    card = (published / "README.md").read_text(encoding="utf-8")
    body = card.split("---\n", 2)[2].lstrip("\n")
    assert body.startswith("**WARNING: this dataset FAILED its validity audit")
    assert "exclusive_ngram" in body.splitlines()[0]
    assert "## Validity audit" in card
    manifest = json.loads((published / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["audit"]["passed"] is False
    assert manifest["audit"]["seconds"] is None  # timing would break byte-reproducibility


def test_a_missed_benchmark_target_is_named_on_the_card_and_in_the_manifest(
    dataset: GeneratedDataset, tmp_path: Path
) -> None:
    unreachable = AuditSettings(query_only_recall_min=1.0, query_only_recall_max=1.0)
    root = tmp_path / "out"
    publish_dataset(dataset, root, Settings(audit=unreachable), allow_failed_audit=True)
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    missed = manifest["audit"]["targets_missed"]
    assert any(m.startswith("dense_query_only_recall ") for m in missed)
    card = (root / "README.md").read_text(encoding="utf-8")
    stamp = next(
        line for line in card.splitlines() if line.startswith("**Note: this dataset misses")
    )
    assert all(m in stamp for m in missed)
    assert card.index(stamp) < card.index("# MemoryQuest")
    assert f"It missed {len(missed)} of the targets" in card and "| **missed** |" in card


def test_the_publish_command_refuses_a_failed_audit_in_one_line(
    dataset: GeneratedDataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = dataset.save(tmp_path / "dataset")
    assert main(["publish", str(source), "--output", str(tmp_path / "out")]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "memoryquest: error: refusing to publish: the validity audit failed"
    ), captured.err
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- the Win Rate report


@pytest.fixture(scope="module")
def judged(handmade: GeneratedDataset) -> tuple[GeneratedDataset, WinRateReport]:
    """The fixture with BM25 at each PGR-ToT budget, and the Win Rate report of their answers."""
    with_bm25 = with_baselines(handmade)
    queries = {r.query_id for r in with_bm25.validation if r.method is RetrievalMethod.PGR_TOT}
    scores = [(1.0, 0.5, 0.0)[i % 3] for i in range(len(queries))]  # won, split, lost, ...
    return with_bm25, judged_report(with_bm25, scores, samples=200)


def _publish_command(source: Path, destination: Path, *extra: str) -> int:
    return main(
        ["publish", str(source), "--output", str(destination), "--allow-failed-audit", *extra]
    )


@pytest.mark.parametrize("where", ["beside the dataset", "--win-rate-report"])
def test_publish_shows_the_win_rate_report_in_the_card_and_the_explorer(
    where: str,
    judged: tuple[GeneratedDataset, WinRateReport],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dataset, report = judged
    source = dataset.save(tmp_path / "dataset")
    if where == "beside the dataset":  # where `pgr run DIR --win-rate` writes it without --output
        report_path = source / WIN_RATE_FILE
        extra: tuple[str, ...] = ()
    else:  # where `pgr run DIR --win-rate --output elsewhere/results.jsonl` wrote it
        report_path = tmp_path / "elsewhere" / "results.winrate.json"
        report_path.parent.mkdir()
        extra = ("--win-rate-report", str(report_path))
    report_path.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    destination = tmp_path / "hub"
    assert _publish_command(source, destination, *extra) == 0
    assert f"with the Win Rate table of {report_path}" in capsys.readouterr().out

    card = (destination / "README.md").read_text(encoding="utf-8")
    (row,) = report.rows
    interval = f"{100 * row.win_rate_low:.1f}..{100 * row.win_rate_high:.1f}%"
    assert "#### Answer-level Win Rate" in card
    assert (
        f"| `pgr_tot` | `bm25` | {row.n} | {row.recall:.3f} | {row.recall_exact:.3f} | "
        f"{row.baseline_recall:.3f} | {row.baseline_recall_exact:.3f} | "
        f"{100 * row.win_rate:.1f}% ({interval}) | {100 * row.length_controlled:.1f}% "
        f"({100 * row.length_controlled_low:.1f}..{100 * row.length_controlled_high:.1f}%) | "
        f"{100 * row.flip_rate:.1f}% | 0 / 0 | {row.wins} / {row.ties} / {row.losses} |"
    ) in card
    assert read_index(destination / "explorer")["win_rates"]["rows"][0]["label"] == (
        "PGR-ToT vs BM25"
    )
    # A copy is published at the root (listed with its checksum), where `explore` finds it again.
    kept = WinRateReport.model_validate_json(
        (destination / WIN_RATE_FILE).read_text(encoding="utf-8")
    )
    assert kept == report
    manifest = json.loads((destination / "manifest.json").read_text(encoding="utf-8"))
    assert WIN_RATE_FILE in {f["path"] for f in manifest["publish"]["files"]}


def test_without_a_win_rate_report_the_card_has_no_win_rate(
    judged: tuple[GeneratedDataset, WinRateReport], tmp_path: Path
) -> None:
    dataset, _ = judged
    source = dataset.save(tmp_path / "dataset")
    assert _publish_command(source, tmp_path / "hub") == 0
    assert "Win Rate" not in (tmp_path / "hub" / "README.md").read_text(encoding="utf-8")
    assert not (tmp_path / "hub" / WIN_RATE_FILE).exists()
    assert "win_rates" not in read_index(tmp_path / "hub" / "explorer")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            '{"rows": [',
            "is not a Win Rate report of `memoryquest pgr run --win-rate`: Invalid JSON",
        ),
        ('{"rows": []}', "bootstrap_samples: Field required"),
        (b"\xff\xfe not text", "cannot read the Win Rate report"),
        ("another dataset", "is the Win Rate report of another dataset: it judged query"),
        (None, "cannot read the Win Rate report"),
    ],
)
def test_a_bad_win_rate_report_is_one_line_naming_it_and_nothing_is_published(
    content: str | bytes | None,
    message: str,
    judged: tuple[GeneratedDataset, WinRateReport],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dataset, report = judged
    source = dataset.save(tmp_path / "dataset")
    bad = source / WIN_RATE_FILE
    if content is None:
        bad.mkdir()
    elif isinstance(content, bytes):
        bad.write_bytes(content)
    elif content == "another dataset":
        strangers = [p.model_copy(update={"query_id": "q-not-here"}) for p in report.pairs]
        bad.write_text(report.model_copy(update={"pairs": strangers}).model_dump_json())
    else:
        bad.write_text(content, encoding="utf-8")
    destination = tmp_path / "hub"
    assert _publish_command(source, destination) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith("memoryquest: error: ") and str(bad) in captured.err
    assert message in captured.err
    assert not destination.exists()


def test_a_missing_win_rate_report_named_by_the_flag_is_an_error(
    judged: tuple[GeneratedDataset, WinRateReport],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dataset, _ = judged
    source = dataset.save(tmp_path / "dataset")
    missing = tmp_path / "results.winrate.json"
    assert _publish_command(source, tmp_path / "hub", "--win-rate-report", str(missing)) == 2
    assert capsys.readouterr().err == (
        f"memoryquest: error: --win-rate-report {missing} does not exist\n"
    )
    assert not (tmp_path / "hub").exists()
