"""Where a deployment's workers get the code, worked out when ``prefect deploy`` runs.

``prefect.yaml`` calls :func:`git_source` as its build step, in the checkout
it deploys from; its pull step then has each worker clone that repository
and branch into the flow run's working directory, so a worker on any
machine runs the deployed code. The clone is temporary, so the deployments'
default output directory is :func:`git_source`'s ``output``, an absolute path.

The environment of ``prefect deploy`` may name each part
(``MEMORYQUEST_REPOSITORY``, ``MEMORYQUEST_BRANCH``, ``MEMORYQUEST_DEPLOY_OUTPUT``);
unset, they come from the checkout.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


class DeploymentSourceError(RuntimeError):
    """The checkout does not say where workers should get the code."""


def git_source(
    repository: str = "", branch: str = "", output: str = "", directory: str = "."
) -> dict[str, str]:
    """The repository and branch workers clone, and the output directory the deployments default to.

    ``repository``: else the checkout's ``origin`` remote, else the checkout
    itself (for workers that see its path: this machine, a shared disk).
    ``branch`` (a tag works too): else the checkout's current branch.
    ``output``: else ``output`` in the checkout. Empty means unset, as
    Prefect fills an unset ``{{ $VARIABLE }}`` with an empty string.
    """
    top = Path(_git(directory, "rev-parse", "--show-toplevel"))
    if not repository:
        try:
            repository = _git(top, "remote", "get-url", "origin")
        except DeploymentSourceError:
            repository = str(top)
    if not branch:
        branch = _git(top, "rev-parse", "--abbrev-ref", "HEAD")
        if branch == "HEAD":
            raise DeploymentSourceError(
                f"{top} is on a detached HEAD: set MEMORYQUEST_BRANCH to the branch or tag "
                "workers should clone"
            )
    return {
        "repository": repository,
        "branch": branch,
        "output": str(Path(output).resolve() if output else top / "output"),
    }


def _git(directory: str | Path, *args: str) -> str:
    try:
        done = subprocess.run(
            ["git", *args], cwd=directory, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        reason = getattr(exc, "stderr", "") or str(exc)
        raise DeploymentSourceError(
            f"git {' '.join(args)} in {directory}: {' '.join(reason.split())}"
        ) from exc
    return done.stdout.strip()
