"""A loopback Hugging Face Hub: the API calls ``huggingface_hub`` makes to push a dataset.

It answers, on 127.0.0.1 only, what ``HfApi.create_repo``, ``create_branch``,
``list_repo_files``, ``create_commit`` (README validation, ``preupload``, the
NDJSON ``commit`` call) and the Git LFS batch API with its upload and verify
actions ask (as huggingface_hub 2.4 calls them; see ``hf_api.py``,
``_commit_api.py`` and ``lfs.py`` there), and keeps what was pushed as the
Hub would: repos, branches, commits with their parents and files, and LFS
objects checked against their sha256. Parquet and PNG files go through LFS,
as a new Hub repo's ``.gitattributes`` says.

The Xet upload path (huggingface_hub's default when ``hf_xet`` is installed)
is not emulated: tests disable it (``HF_HUB_DISABLE_XET``) and push through
LFS, the protocol the Hub still accepts.

Every request needs ``Authorization: Bearer <token>`` (except the LFS upload,
a presigned URL, as on the Hub); a wrong token gets the Hub's 401.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote, urlsplit

from memoryquest.testing.fake_openai.loopback import LoopbackServer

LFS_SUFFIXES = (".parquet", ".png")
GITATTRIBUTES = (
    b"*.parquet filter=lfs diff=lfs merge=lfs -text\n*.png filter=lfs diff=lfs merge=lfs -text\n"
)
INVALID_TOKEN = "Invalid credentials in Authorization header"


@dataclass
class Commit:
    oid: str
    parent: str | None
    message: str
    files: dict[str, bytes]
    lfs_paths: frozenset[str]


@dataclass
class Repo:
    repo_id: str
    private: bool
    branches: dict[str, str] = field(default_factory=dict)


class _HubAnswer(Exception):
    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra  # more of the error's JSON body


def _git_blob_sha1(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


class FakeHub(LoopbackServer):
    """``with FakeHub(token="hf_...") as hub``; ``hub.endpoint`` is the ``HF_ENDPOINT``."""

    thread_name = "fake-hub"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _Handler

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token
        self.repos: dict[str, Repo] = {}
        self.commits: dict[str, Commit] = {}
        self.lfs_objects: dict[str, bytes] = {}
        self.requests: list[tuple[str, str, int]] = []  # method, path, status
        self.failures: list[str] = []  # requests the fake could not answer (a test bug)
        self.refuse_commit_number: int | None = None  # 1-based: that commit call gets a 403
        self._commit_calls = 0
        self._lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --------------------------------------------------------------------- what was pushed

    def head(self, repo_id: str, revision: str = "main") -> Commit:
        return self.commits[self.repos[repo_id].branches[revision]]

    def seed(self, repo_id: str, files: dict[str, bytes], revision: str = "main") -> str:
        """A commit made by someone else (files on the revision before a push)."""
        with self._lock:
            repo = self.repos.get(repo_id) or self._create(repo_id, private=False)
            parent = self.commits[repo.branches[revision]]
            return self._commit(repo, revision, {**parent.files, **files}, "seeded", set())

    def _create(self, repo_id: str, private: bool) -> Repo:
        repo = Repo(repo_id, private)
        self.repos[repo_id] = repo
        commit = self._new_commit(None, {".gitattributes": GITATTRIBUTES}, "initial commit", set())
        repo.branches["main"] = commit.oid
        return repo

    def _new_commit(
        self, parent: str | None, files: dict[str, bytes], message: str, lfs_paths: set[str]
    ) -> Commit:
        digest = hashlib.sha1(
            json.dumps(
                [
                    parent,
                    message,
                    sorted((p, hashlib.sha256(c).hexdigest()) for p, c in files.items()),
                ]
            ).encode()
        ).hexdigest()
        commit = Commit(digest, parent, message, dict(files), frozenset(lfs_paths))
        self.commits[commit.oid] = commit
        return commit

    def _commit(
        self, repo: Repo, revision: str, files: dict[str, bytes], message: str, lfs: set[str]
    ) -> str:
        commit = self._new_commit(repo.branches[revision], files, message, lfs)
        repo.branches[revision] = commit.oid
        return commit.oid

    # --------------------------------------------------------------------- the API

    def answer(
        self, method: str, path: str, query: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, Any]:
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if method == "PUT" and parts[0] == "lfs-upload":
            return self._lfs_upload(parts[1], body)
        if headers.get("authorization") != f"Bearer {self.token}":
            raise _HubAnswer(401, INVALID_TOKEN)
        kind = headers.get("content-type", "")
        is_json = "json" in kind and "ndjson" not in kind  # application/vnd.git-lfs+json too
        request = json.loads(body) if body and is_json else {}
        if parts[:3] == ["api", "repos", "create"]:
            return self._create_repo(request)
        if parts[:2] == ["api", "validate-yaml"]:
            return 200, {"errors": [], "warnings": []}
        if parts[0] == "lfs-upload" and parts[-1] == "verify":
            oid = parts[1]
            if self.lfs_objects.get(oid) is None or len(self.lfs_objects[oid]) != request["size"]:
                raise _HubAnswer(422, f"object {oid} was not uploaded")
            return 200, {}
        if len(parts) >= 4 and parts[0] == "datasets" and parts[2].endswith(".git"):
            return self._lfs_batch(f"{parts[1]}/{parts[2].removesuffix('.git')}", request)
        if len(parts) < 6 or parts[:2] != ["api", "datasets"]:
            raise _HubAnswer(404, f"no route {method} {path}")
        repo = self.repos.get(f"{parts[2]}/{parts[3]}")
        if repo is None:
            raise _HubAnswer(404, "Repository not found")
        action, revision = parts[4], parts[5]  # a revision with a '/' comes quoted
        if action == "branch" and method == "POST":
            if revision in repo.branches:
                raise _HubAnswer(409, f"branch {revision} already exists")
            repo.branches[revision] = repo.branches[request.get("startingPoint") or "main"]
            return 200, {}
        if revision not in set(repo.branches) | set(self.commits):
            raise _HubAnswer(404, f"Invalid rev id: {revision}")
        if action == "tree":
            return self._tree(repo, revision)
        if action == "revision":
            return 200, {"id": repo.repo_id, "sha": repo.branches.get(revision, revision)}
        if action == "preupload":
            return self._preupload(repo, revision, request)
        if action == "commit" and method == "POST":
            return self._commit_call(repo, revision, body)
        raise _HubAnswer(404, f"no route {method} {path}")

    def _create_repo(self, request: dict[str, Any]) -> tuple[int, Any]:
        if request.get("type") != "dataset":
            raise _HubAnswer(400, "this fake Hub holds dataset repos only")
        repo_id = f"{request['organization']}/{request['name']}"
        if repo_id in self.repos:
            # The Hub's 409 names the repo's URL; create_repo(exist_ok=True) returns it.
            raise _HubAnswer(
                409,
                "You already created this dataset repo",
                url=f"{self.endpoint}/datasets/{repo_id}",
            )
        self._create(repo_id, private=request.get("visibility") == "private")
        return 200, {"url": f"{self.endpoint}/datasets/{repo_id}", "name": repo_id}

    def _tree(self, repo: Repo, revision: str) -> tuple[int, Any]:
        commit = self.commits[repo.branches.get(revision, revision)]
        entries = []
        for name, content in sorted(commit.files.items()):
            entry: dict[str, Any] = {
                "type": "file",
                "path": name,
                "size": len(content),
                "oid": _git_blob_sha1(content),
            }
            if name in commit.lfs_paths:
                entry["lfs"] = {
                    "oid": hashlib.sha256(content).hexdigest(),
                    "size": len(content),
                    "pointerSize": 134,
                }
            entries.append(entry)
        return 200, entries

    def _preupload(self, repo: Repo, revision: str, request: dict[str, Any]) -> tuple[int, Any]:
        files = [
            {
                "path": f["path"],
                "uploadMode": "lfs" if f["path"].endswith(LFS_SUFFIXES) else "regular",
                "shouldIgnore": False,
            }
            for f in request["files"]
        ]
        return 200, {"files": files, "commitOid": repo.branches.get(revision, revision)}

    def _lfs_batch(self, repo_id: str, request: dict[str, Any]) -> tuple[int, Any]:
        if repo_id not in self.repos:
            raise _HubAnswer(404, "Repository not found")
        objects = []
        for item in request["objects"]:
            oid, size = item["oid"], item["size"]
            entry: dict[str, Any] = {"oid": oid, "size": size}
            if oid not in self.lfs_objects:
                entry["actions"] = {
                    "upload": {"href": f"{self.endpoint}/lfs-upload/{oid}"},
                    "verify": {"href": f"{self.endpoint}/lfs-upload/{oid}/verify"},
                }
            objects.append(entry)
        return 200, {"transfer": "basic", "objects": objects}

    def _lfs_upload(self, oid: str, body: bytes) -> tuple[int, Any]:
        if hashlib.sha256(body).hexdigest() != oid:
            raise _HubAnswer(400, f"content does not match sha256 {oid}")
        self.lfs_objects[oid] = body
        return 200, {}

    def _commit_call(self, repo: Repo, revision: str, body: bytes) -> tuple[int, Any]:
        self._commit_calls += 1
        if self._commit_calls == self.refuse_commit_number:
            raise _HubAnswer(403, "You don't have the rights to commit to this repo")
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        header = lines[0]
        if header["key"] != "header":
            raise _HubAnswer(400, "the first line must be the header")
        if revision not in repo.branches:
            raise _HubAnswer(400, f"cannot commit to {revision}: not a branch")
        head = repo.branches[revision]
        parent = header["value"].get("parentCommit")
        if parent is not None and parent != head:
            raise _HubAnswer(412, "A commit has happened since. Please refresh and try again.")
        files = dict(self.commits[head].files)
        lfs = set(self.commits[head].lfs_paths)
        for line in lines[1:]:
            key, value = line["key"], line["value"]
            name = value["path"]
            if key == "file":
                files[name] = base64.b64decode(value["content"])
                lfs.discard(name)
            elif key == "lfsFile":
                if value["oid"] not in self.lfs_objects:
                    raise _HubAnswer(422, f"LFS object {value['oid']} of {name} was not uploaded")
                files[name] = self.lfs_objects[value["oid"]]
                lfs.add(name)
            elif key == "deletedFile":
                if files.pop(name, None) is None:
                    raise _HubAnswer(404, "A file with this name doesn't exist")
                lfs.discard(name)
            else:
                raise _HubAnswer(400, f"unexpected commit operation {key}")
        oid = self._commit(repo, revision, files, header["value"]["summary"], lfs)
        return 200, {
            "success": True,
            "commitOid": oid,
            "commitUrl": f"{self.endpoint}/datasets/{repo.repo_id}/commit/{oid}",
            "pullRequestUrl": None,
        }


class _Handler(BaseHTTPRequestHandler):
    owner: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _serve(self) -> None:
        body = self._body()
        url = urlsplit(self.path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            with self.owner._lock:
                status, payload = self.owner.answer(
                    self.command, url.path, url.query, headers, body
                )
        except _HubAnswer as answer:
            status, payload = answer.status, {"error": answer.message, **answer.extra}
        except Exception as exc:  # a request this fake does not understand: the test must see it
            self.owner.failures.append(f"{self.command} {url.path}: {exc!r}")
            status, payload = 500, {"error": f"fake Hub failure: {exc!r}"}
        extra = {"X-Error-Message": payload["error"]} if status >= 400 else {}
        with self.owner._lock:
            self.owner.requests.append((self.command, url.path, status))
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                chunk = self.rfile.read(size)
                self.rfile.readline()  # the CRLF after each chunk
                if not size:
                    return b"".join(chunks)
                chunks.append(chunk)
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    do_GET = do_POST = do_PUT = _serve
