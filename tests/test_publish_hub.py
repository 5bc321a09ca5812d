"""``memoryquest publish --push-to-hub``, end to end against a loopback Hub (tests/hub_fixture.py).

The command publishes, then pushes through huggingface_hub: repo creation, a
branch, the file listing, README validation, preupload, LFS batch + upload +
verify for the Parquet files and the two NDJSON commits. The Hub's side is
read back from what the loopback Hub stored: the data commit holds the
published files, the record commit on top of it only adds the Hub section to
manifest.json and the card, and the local folder ends as the revision's head.
"""

from __future__ import annotations

import hashlib
import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryquest.cli.main import main
from memoryquest.publish import load_published
from memoryquest.publish.card import HUB_LINE, with_hub_provenance
from memoryquest.publish.hub import HubTarget, documents, hub_access

try:
    from tests.cli_fixture import one_error_line
    from tests.hub_fixture import INVALID_TOKEN, FakeHub
    from tests.publish_fixture import build_publish_fixture
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from cli_fixture import one_error_line
    from hub_fixture import INVALID_TOKEN, FakeHub
    from publish_fixture import build_publish_fixture

pytestmark = pytest.mark.usefixtures("clean_settings_env")

TOKEN = f"hf_{uuid.uuid4().hex}"
REPO = "memoryquest-org/memoryquest-sample"
ERROR = "memoryquest: error: "


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_publish_fixture(users=3, queries_per_user=1).save(
        tmp_path_factory.mktemp("hub") / "run" / "dataset"
    )


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    import huggingface_hub.constants

    # The loopback Hub speaks LFS, not Xet (see tests/hub_fixture.py).
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # a caller's env aside
    with FakeHub(token=TOKEN) as server:
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        yield server
    assert server.failures == []  # every call the push made, the loopback Hub understood


def publish(dataset_dir: Path, output: Path, *extra: str) -> list[str]:
    return [
        "publish",
        str(dataset_dir),
        "--output",
        str(output),
        "--allow-failed-audit",
        *extra,
    ]


def local_files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def manifest_of(content: bytes) -> dict[str, object]:
    document = json.loads(content)
    assert isinstance(document, dict)
    return document


def without_hub(files: dict[str, bytes]) -> dict[str, bytes]:
    """The files as publishing wrote them, before a push recorded itself in two of them."""
    manifest = manifest_of(files["manifest.json"])
    card = files["README.md"].decode()
    base_manifest, base_card = documents(manifest, card, None)
    return {**files, "manifest.json": base_manifest, "README.md": base_card}


# --------------------------------------------------------------------------- a push


def test_a_push_puts_the_published_folder_on_the_hub_and_records_its_commit(
    hub: FakeHub, dataset_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "published"
    code = main(publish(dataset_dir, output, "--push-to-hub", REPO))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.err == ""
    assert TOKEN not in captured.out

    local = local_files(output)
    head = hub.head(REPO)
    data = hub.commits[head.parent or ""]
    initial = hub.commits[data.parent or ""]
    assert initial.parent is None and set(initial.files) == {".gitattributes"}
    assert hub.repos[REPO].private is False

    # The manifest and the card name the data commit; the local folder is the revision's head.
    record = manifest_of(local["manifest.json"])["publish"]
    assert isinstance(record, dict)
    assert record["hub"] == {
        "repo_id": REPO,
        "repo_type": "dataset",
        "revision": "main",
        "data_commit": data.oid,
        "url": f"{hub.endpoint}/datasets/{REPO}",
    }
    card = local["README.md"].decode()
    assert card.count(HUB_LINE) == 1
    assert f"commit `{data.oid}`" in card
    assert card.index(HUB_LINE) > card.index("## Provenance")
    assert head.files == {**local, ".gitattributes": initial.files[".gitattributes"]}
    card_entry = next(e for e in record["files"] if e["path"] == "README.md")
    assert card_entry["sha256"] == hashlib.sha256(local["README.md"]).hexdigest()

    # The data commit holds the same files, with manifest and card as publishing wrote them;
    # the record commit changed nothing else.
    assert data.files == {**without_hub(local), ".gitattributes": initial.files[".gitattributes"]}
    assert HUB_LINE not in data.files["README.md"].decode()
    assert "hub" not in manifest_of(data.files["manifest.json"])["publish"]  # type: ignore[operator]
    changed = {name for name in head.files if head.files[name] != data.files.get(name)}
    assert changed == {"manifest.json", "README.md"}

    # Parquet went through LFS (batch, upload, verify), checked against its sha256.
    parquet = {name for name in local if name.endswith(".parquet")}
    assert parquet and parquet <= set(head.lfs_paths)
    assert "manifest.json" not in head.lfs_paths
    for name in parquet:
        assert hub.lfs_objects[hashlib.sha256(local[name]).hexdigest()] == local[name]
    calls = {
        (method, path.split("/")[-1] if "lfs-upload" in path else path)
        for method, path, _ in hub.requests
    }
    assert ("POST", f"/datasets/{REPO}.git/info/lfs/objects/batch") in calls
    assert ("PUT", hashlib.sha256(local[min(parquet)]).hexdigest()) in calls
    assert ("POST", "verify") in calls
    assert [s for m, p, s in hub.requests if p.endswith("/commit/main")] == [200, 200]

    # Both the local folder and the Hub's head load as the published dataset they are.
    pulled = tmp_path / "pulled"
    for name, content in head.files.items():
        (pulled / name).parent.mkdir(parents=True, exist_ok=True)
        (pulled / name).write_bytes(content)
    assert load_published(pulled).queries == load_published(output).queries
    assert len(load_published(output).queries) == 3
    assert f"data commit {data.oid}" in captured.out and head.oid in captured.out


def test_a_branch_and_a_private_repo(
    hub: FakeHub, dataset_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "published"
    argv = publish(dataset_dir, output, "--push-to-hub", REPO, "--revision", "v2", "--private")
    assert main(argv) == 0, capsys.readouterr().err
    assert hub.repos[REPO].private is True
    assert set(hub.head(REPO, "main").files) == {".gitattributes"}  # main untouched
    head = hub.head(REPO, "v2")
    record = manifest_of((output / "manifest.json").read_bytes())["publish"]
    assert isinstance(record, dict)
    assert record["hub"]["revision"] == "v2"
    assert record["hub"]["data_commit"] == head.parent
    assert head.files["manifest.json"] == (output / "manifest.json").read_bytes()


def test_a_push_again_replaces_what_the_revision_had(
    hub: FakeHub, dataset_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = {"data/old_config/train-00000-of-00001.parquet": b"PAR1 old", "notes.txt": b"hi"}
    hub.seed(REPO, stale)
    output = tmp_path / "published"
    assert main(publish(dataset_dir, output, "--push-to-hub", REPO)) == 0
    first = hub.head(REPO)
    assert not set(stale) & set(first.files)
    assert ".gitattributes" in first.files
    assert "removed 2 files" in capsys.readouterr().out

    # Publishing again and pushing again: one Hub line, naming the new data commit.
    assert main(publish(dataset_dir, output, "--push-to-hub", REPO)) == 0, capsys.readouterr().err
    second = hub.head(REPO)
    assert second.oid != first.oid
    card = (output / "README.md").read_text(encoding="utf-8")
    assert card.count(HUB_LINE) == 1 and f"commit `{second.parent}`" in card
    assert second.files["README.md"] == card.encode()


# --------------------------------------------------------------------------- failures: one line, nothing lost


def assert_published_without_hub(output: Path) -> None:
    """The local folder is the published dataset, whole, that no push recorded itself in."""
    record = manifest_of((output / "manifest.json").read_bytes())["publish"]
    assert isinstance(record, dict) and "hub" not in record
    assert HUB_LINE not in (output / "README.md").read_text(encoding="utf-8")
    assert len(load_published(output).queries) == 3


def failed_push_line(capsys: pytest.CaptureFixture[str], argv: list[str], code: int) -> str:
    assert main(argv) == code
    captured = capsys.readouterr()
    assert "published to" in captured.out  # publishing itself finished
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(ERROR)
    assert TOKEN not in captured.err + captured.out
    return lines[0]


def test_a_refused_token_is_one_line_naming_the_repo(
    hub: FakeHub,
    dataset_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_not_the_right_one")
    output = tmp_path / "published"
    line = failed_push_line(capsys, publish(dataset_dir, output, "--push-to-hub", REPO), code=2)
    log = dataset_dir.parent / "logs" / "publish.log"
    assert line == (
        f"{ERROR}push to {REPO} (revision main) at {hub.endpoint} refused: HTTP 401: "
        f"{INVALID_TOKEN} (check HF_TOKEN); nothing was committed; the published dataset stays "
        f"in {output} (log: {log})"
    )
    assert hub.repos == {}
    assert "hf_not_the_right_one" not in log.read_text(encoding="utf-8")
    assert_published_without_hub(output)


def test_an_unreachable_hub_is_one_line_naming_the_repo(
    dataset_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as sock:  # a loopback port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    output = tmp_path / "published"
    line = failed_push_line(capsys, publish(dataset_dir, output, "--push-to-hub", REPO), code=1)
    assert line.startswith(
        f"{ERROR}push to {REPO} (revision main) at {endpoint} failed: no answer (ConnectError); "
        f"nothing was committed; the published dataset stays in {output} (log: "
    ), line
    assert_published_without_hub(output)


def test_a_record_commit_refused_says_where_the_data_is(
    hub: FakeHub, dataset_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hub.refuse_commit_number = 2
    output = tmp_path / "published"
    line = failed_push_line(capsys, publish(dataset_dir, output, "--push-to-hub", REPO), code=2)
    data = hub.head(REPO)
    assert "refused: HTTP 403: You don't have the rights to commit to this repo" in line
    assert f"the data files are at commit {data.oid}, but its manifest.json and card" in line
    assert data.files["manifest.json"] == (output / "manifest.json").read_bytes()
    assert_published_without_hub(output)


# --------------------------------------------------------------------------- refused before any work


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--push-to-hub", "no-namespace"], "--push-to-hub needs a dataset repo id ORG/NAME"),
        (["--push-to-hub", "org/../name"], "--push-to-hub needs a dataset repo id ORG/NAME"),
        (["--revision", "v2"], "--revision and --private go with --push-to-hub ORG/NAME"),
        (["--private"], "--revision and --private go with --push-to-hub ORG/NAME"),
    ],
)
def test_a_bad_push_request_is_refused_before_publishing(
    hub: FakeHub,
    dataset_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    output = tmp_path / "published"
    assert message in one_error_line(capsys, publish(dataset_dir, output, *extra))
    assert not output.exists()
    assert hub.requests == []


def test_a_missing_token_is_refused_before_publishing(
    dataset_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    output = tmp_path / "published"
    line = one_error_line(capsys, publish(dataset_dir, output, "--push-to-hub", REPO))
    assert line == f"{ERROR}--push-to-hub needs a Hugging Face token with write access in HF_TOKEN"
    assert not output.exists()


# --------------------------------------------------------------------------- the pieces


def test_hub_access_reads_the_environment() -> None:
    access = hub_access({"HF_TOKEN": " hf_x ", "HF_ENDPOINT": "http://127.0.0.1:9/"})
    assert (access.token, access.endpoint) == ("hf_x", "http://127.0.0.1:9")
    assert hub_access({"HF_TOKEN": "hf_x"}).endpoint == "https://huggingface.co"
    with pytest.raises(ValueError, match="HF_ENDPOINT must be an http"):
        hub_access({"HF_TOKEN": "hf_x", "HF_ENDPOINT": "127.0.0.1:9"})
    with pytest.raises(ValueError, match="--revision must be a branch name"):
        HubTarget(REPO, revision=" ")


def test_the_card_names_one_push_at_a_time() -> None:
    card = "# Title\n\n## Provenance\n\n- Generator: memoryquest\n"
    hub = {"repo_id": REPO, "url": "u", "revision": "main", "data_commit": "a" * 40}
    once = with_hub_provenance(card, hub)
    assert once.splitlines()[4].startswith(HUB_LINE) and "a" * 40 in once
    again = with_hub_provenance(once, {**hub, "data_commit": "b" * 40})
    assert again.count(HUB_LINE) == 1 and "b" * 40 in again and "a" * 40 not in again
    assert with_hub_provenance(again, None) == card
    with pytest.raises(ValueError, match="no '## Provenance' section"):
        with_hub_provenance("# Title\n", hub)
