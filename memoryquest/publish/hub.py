"""Push a published dataset folder to the Hugging Face Hub (``memoryquest publish --push-to-hub``).

The manifest and the card should name the commit that holds the data, but a
commit's id is known only once it is made. So a push makes two commits on
the target revision (a branch, ``main`` by default):

1. the **data commit**: every file of the published folder, with
   ``manifest.json`` and ``README.md`` as publishing wrote them (no Hub
   section), and the deletion of any file the revision had that the folder
   does not (a config that no longer exists, say). On its own it is a
   complete, loadable dataset;
2. the **record commit**, whose parent must be the data commit (the Hub
   refuses it if anything else was committed in between): ``manifest.json``
   with ``publish.hub`` (repo, revision, the data commit's id) and the card
   with the same in its Provenance list. It changes no data file, so the data
   at the revision's head is byte for byte the data commit's.

Only then are ``manifest.json`` and ``README.md`` of the local folder
rewritten the same way (each file replaced atomically); a push that fails
leaves the folder as it was. ``publish.files`` keeps the card's size and
sha256 true.

Where and as whom: the token comes from ``HF_TOKEN`` and the Hub from
``HF_ENDPOINT`` (default ``https://huggingface.co``), the variables of
``huggingface_hub`` itself; they are read when the push starts and passed to
it explicitly, and the token is never written anywhere.

A push that fails is one :class:`HubRefusedError` (the Hub refused it: a
refused token, a missing permission, a conflicting commit; the command's exit
code 2) or :class:`HubUnreachableError` (no answer, or a failure on the Hub's
side; exit code 1), naming the repo, what the Hub said, and how far the push
got.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryquest.publish.card import with_hub_provenance
from memoryquest.publish.errors import PublishError
from memoryquest.publish.layout import CARD_FILE, MANIFEST_FILE
from memoryquest.publish.parquet import sha256_file

if TYPE_CHECKING:
    from huggingface_hub import HfApi

TOKEN_VARIABLE = "HF_TOKEN"
ENDPOINT_VARIABLE = "HF_ENDPOINT"
DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_REVISION = "main"
REPO_TYPE = "dataset"
HUB_SECTION = "hub"  # in the manifest's "publish" section
KEPT_REMOTE_FILES = frozenset({".gitattributes"})  # the Hub's own; never deleted by a push

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


class HubRefusedError(ValueError):
    """The Hub answered a push with an error (a refused token, no write access, a conflict)."""


class HubUnreachableError(ConnectionError):
    """The Hub did not answer a push, or failed on its side (HTTP 5xx, after huggingface_hub's retries)."""


@dataclass(frozen=True)
class HubTarget:
    """Where a push goes: ``ORG/NAME`` (a dataset repo), a branch, and whether a new repo is private."""

    repo_id: str
    revision: str = DEFAULT_REVISION
    private: bool = False

    def __post_init__(self) -> None:
        if not _REPO_ID.fullmatch(self.repo_id) or ".." in self.repo_id:
            raise ValueError(
                f"--push-to-hub needs a dataset repo id ORG/NAME (letters, digits, '-', '_', '.'), "
                f"got {self.repo_id!r}"
            )
        if not self.revision.strip() or self.revision != self.revision.strip():
            raise ValueError(f"--revision must be a branch name, got {self.revision!r}")


@dataclass(frozen=True)
class HubAccess:
    """The token and the Hub's address, from the environment (:func:`hub_access`)."""

    token: str
    endpoint: str


@dataclass(frozen=True)
class HubPush:
    """A finished push: the data commit the manifest names, and the record commit on top of it."""

    repo_id: str
    revision: str
    data_commit: str
    record_commit: str
    url: str  # the repo's page
    files: int
    deleted: tuple[str, ...]


def hub_access(environ: Mapping[str, str] | None = None) -> HubAccess:
    """``HF_TOKEN`` and ``HF_ENDPOINT``; a missing token is a one-line ValueError."""
    environ = os.environ if environ is None else environ
    token = environ.get(TOKEN_VARIABLE, "").strip()
    if not token:
        raise ValueError(
            f"--push-to-hub needs a Hugging Face token with write access in {TOKEN_VARIABLE}"
        )
    endpoint = (environ.get(ENDPOINT_VARIABLE) or DEFAULT_ENDPOINT).strip().rstrip("/")
    if not endpoint.startswith(("http://", "https://")):
        raise ValueError(f"{ENDPOINT_VARIABLE} must be an http(s) URL, got {endpoint!r}")
    return HubAccess(token=token, endpoint=endpoint)


# --------------------------------------------------------------------------- the two documents


def _read_published(folder: Path) -> tuple[dict[str, Any], str]:
    try:
        manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
        card = (folder / CARD_FILE).read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise PublishError(f"{folder} is not a published dataset: {exc}") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("publish"), dict):
        raise PublishError(f"{folder / MANIFEST_FILE} has no 'publish' section")
    return manifest, card


def documents(
    manifest: Mapping[str, Any], card: str, hub: Mapping[str, str] | None
) -> tuple[bytes, bytes]:
    """``manifest.json`` and ``README.md`` naming ``hub`` (None: naming no push), as bytes.

    The card's entry in ``publish.files`` follows its new content.
    """
    card_bytes = with_hub_provenance(card, hub).encode("utf-8")
    document = json.loads(json.dumps(manifest))  # a deep copy
    publish = document["publish"]
    publish.pop(HUB_SECTION, None)
    if hub is not None:
        publish[HUB_SECTION] = dict(hub)
    for entry in publish.get("files", []):
        if entry.get("path") == CARD_FILE:
            entry["bytes"] = len(card_bytes)
            entry["sha256"] = hashlib.sha256(card_bytes).hexdigest()
    manifest_bytes = (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    return manifest_bytes, card_bytes


def _replace(path: Path, content: bytes) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(content)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


# --------------------------------------------------------------------------- pushing


def _local_files(folder: Path) -> list[str]:
    return sorted(
        path.relative_to(folder).as_posix()
        for path in folder.rglob("*")
        if path.is_file() and not path.relative_to(folder).as_posix().startswith(".")
    )


def _commit_data(
    api: HfApi, folder: Path, target: HubTarget, manifest: bytes, card: bytes, run_id: str
) -> tuple[str, tuple[str, ...], int]:
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    # Without --private the Hub's default visibility for the namespace applies.
    private = True if target.private else None
    api.create_repo(target.repo_id, repo_type=REPO_TYPE, private=private, exist_ok=True)
    if target.revision != DEFAULT_REVISION:
        api.create_branch(
            target.repo_id, repo_type=REPO_TYPE, branch=target.revision, exist_ok=True
        )
    local = _local_files(folder)
    remote = api.list_repo_files(target.repo_id, repo_type=REPO_TYPE, revision=target.revision)
    stale = tuple(sorted(set(remote) - set(local) - KEPT_REMOTE_FILES))
    written = {MANIFEST_FILE: manifest, CARD_FILE: card}
    operations: list[CommitOperationAdd | CommitOperationDelete] = [
        CommitOperationAdd(path_in_repo=name, path_or_fileobj=written.get(name, str(folder / name)))
        for name in local
    ]
    operations += [CommitOperationDelete(path_in_repo=name) for name in stale]
    commit = api.create_commit(
        target.repo_id,
        operations,
        commit_message=f"memoryquest: publish run {run_id}",
        commit_description="The published dataset; the next commit records this commit's id in "
        "manifest.json and the dataset card.",
        repo_type=REPO_TYPE,
        revision=target.revision,
    )
    return commit.oid, stale, len(local)


def push_to_hub(folder: Path, target: HubTarget, access: HubAccess) -> HubPush:
    """Push the published dataset in ``folder`` to ``target`` (see the module docstring)."""
    from huggingface_hub import CommitOperationAdd, HfApi

    folder = Path(folder)
    manifest, card = _read_published(folder)
    for name in _local_files(folder):
        if name.startswith("data/") and not name.endswith(".parquet"):
            raise PublishError(f"{folder}: {name} is not a Parquet file; not pushing")
    listed = {e["path"]: e["sha256"] for e in manifest["publish"].get("files", [])}
    for name, digest in listed.items():
        if name.startswith("data/") and sha256_file(folder / name) != digest:
            raise PublishError(
                f"{folder}: {name} does not match its sha256 in {MANIFEST_FILE}; not pushing"
            )
    run_id = str(manifest.get("run_id", "?"))
    api = HfApi(endpoint=access.endpoint, token=access.token)
    repo_url = f"{access.endpoint}/{REPO_TYPE}s/{target.repo_id}"
    data_commit: str | None = None
    try:
        base_manifest, base_card = documents(manifest, card, None)
        data_commit, stale, count = _commit_data(
            api, folder, target, base_manifest, base_card, run_id
        )
        hub = {
            "repo_id": target.repo_id,
            "repo_type": REPO_TYPE,
            "revision": target.revision,
            "data_commit": data_commit,
            "url": repo_url,
        }
        final_manifest, final_card = documents(manifest, card, hub)
        record = api.create_commit(
            target.repo_id,
            [
                CommitOperationAdd(path_in_repo=MANIFEST_FILE, path_or_fileobj=final_manifest),
                CommitOperationAdd(path_in_repo=CARD_FILE, path_or_fileobj=final_card),
            ],
            commit_message=f"memoryquest: record data commit {data_commit[:12]}",
            commit_description=f"manifest.json (publish.hub) and the dataset card name commit "
            f"{data_commit}, which holds this dataset's files; this commit changes no data file.",
            repo_type=REPO_TYPE,
            revision=target.revision,
            parent_commit=data_commit,
        )
    except Exception as exc:
        raise _push_error(exc, target, access, folder, data_commit) from exc
    _replace(folder / MANIFEST_FILE, final_manifest)
    _replace(folder / CARD_FILE, final_card)
    return HubPush(
        repo_id=target.repo_id,
        revision=target.revision,
        data_commit=data_commit,
        record_commit=record.oid,
        url=repo_url,
        files=count,
        deleted=stale,
    )


def _push_error(
    exc: Exception, target: HubTarget, access: HubAccess, folder: Path, data_commit: str | None
) -> Exception:
    """The one-line error of a failed push, or ``exc`` itself when it is not the Hub's doing."""
    from huggingface_hub.errors import HfHubHTTPError

    where = f"push to {target.repo_id} (revision {target.revision}) at {access.endpoint}"
    if data_commit is None:
        kept = f"nothing was committed; the published dataset stays in {folder}"
    else:
        kept = (
            f"the data files are at commit {data_commit}, but its manifest.json and card do not "
            f"name it yet (push again); the published dataset stays in {folder}"
        )
    refusal = next((e for e in _causes(exc) if isinstance(e, HfHubHTTPError)), None)
    if refusal is not None:
        response = refusal.response
        status = response.status_code if response is not None else None
        said = (refusal.server_message or "").strip().splitlines()
        reason = f"HTTP {status}" + (f": {said[0]}" if said else "")
        if status is not None and status >= 500:
            return HubUnreachableError(f"{where} failed: {reason}; {kept}")
        hint = ""
        if status == 401:
            hint = f" (check {TOKEN_VARIABLE})"
        elif status == 403:
            hint = f" (can the token in {TOKEN_VARIABLE} write to {target.repo_id.split('/')[0]}?)"
        return HubRefusedError(f"{where} refused: {reason}{hint}; {kept}")
    if _is_network_error(exc):
        return HubUnreachableError(f"{where} failed: no answer ({type(exc).__name__}); {kept}")
    return exc


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it was raised from or while handling, outermost first."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    return chain


def _is_network_error(exc: BaseException) -> bool:
    """A connection refused, reset or timed out, at any depth of the exception's causes.

    huggingface_hub speaks HTTP through an httpx-style client whose errors all
    derive from a ``TransportError``; matched by name, not imported, since the
    client library is huggingface_hub's choice, not ours.
    """
    return any(
        isinstance(seen, OSError)
        or any(cls.__name__ in ("TransportError", "TimeoutException") for cls in type(seen).__mro__)
        for seen in _causes(exc)
    )


__all__ = [
    "HubAccess",
    "HubPush",
    "HubRefusedError",
    "HubTarget",
    "HubUnreachableError",
    "documents",
    "hub_access",
    "push_to_hub",
]
