"""scripts/ensure-browser.sh, the browser step of ``make test``, run against stub commands.

Each test runs the real script with bash and a PATH holding only stub ``id``, ``sudo``,
``apt-get``, ``chromium`` and ``python`` commands written into a tmp dir. Every stub appends
its command line to a log, so each test checks exactly what the script ran, in order.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPT = REPO_ROOT / "scripts" / "ensure-browser.sh"
BASH = shutil.which("bash") or "/bin/bash"
CHMOD = shutil.which("chmod") or "/bin/chmod"

APT_UPDATE = "apt-get update"
APT_INSTALL = "apt-get install -y --no-install-recommends chromium"
PLAYWRIGHT_CHECK = "python -c"
PLAYWRIGHT_INSTALL = "python -m playwright install chromium"

# Stubs use only bash builtins (the PATH holds nothing else); statuses come from the environment.
STUBS = {
    "id": '[ "$1" = -u ] && echo "${STUB_UID:-1000}"',
    "sudo": "\n".join(
        [
            '[ "$1" = -n ] && shift',
            '[ "$1" = true ] && exit "${STUB_SUDO_STATUS:-0}"',
            'exec "$@"',
        ]
    ),
    # A successful install puts a chromium on the PATH, as Debian's package does.
    "apt-get": "\n".join(
        [
            'status="${STUB_APT_STATUS:-0}"',
            'if [ "$1" = install ] && [ "$status" = 0 ]; then',
            '  echo "#!$STUB_BASH" > "$STUB_DIR/chromium"',
            '  "$STUB_CHMOD" +x "$STUB_DIR/chromium"',
            "fi",
            'exit "$status"',
        ]
    ),
    "python": "\n".join(
        [
            'if [ "$1" = -c ]; then exit "${STUB_PLAYWRIGHT_HAS_CHROMIUM:-1}"; fi',
            'exit "${STUB_PLAYWRIGHT_INSTALL_STATUS:-0}"',
        ]
    ),
    "chromium": "exit 0",
}


@dataclass
class Run:
    status: int
    log: list[str]
    stdout: str
    stderr: str


class Machine:
    """A tmp dir of stub commands, and a way to run the script against them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir()
        self.log = root / "log"
        self.env: dict[str, str] = {
            "PATH": str(self.bin),
            "HOME": str(root),
            "STUB_LOG": str(self.log),
            "STUB_DIR": str(self.bin),
            "STUB_BASH": BASH,
            "STUB_CHMOD": CHMOD,
            # Stands in for /usr/bin/chromium, which this machine may have: absent unless made.
            "MEMORYQUEST_CHROMIUM_CANDIDATES": str(root / "usr-bin-chromium"),
        }

    def stub(self, *names: str) -> None:
        for name in names:
            path = self.bin / name
            record = f'echo "{name} $*"'
            if name == "python":  # python -c's argument is a whole program: log only "-c"
                record = 'if [ "$1" = -c ]; then echo "python -c"; else echo "python $*"; fi'
            path.write_text(f'#!{BASH}\n{record} >> "$STUB_LOG"\n{STUBS[name]}\n')
            path.chmod(0o755)

    def run(self, **env: str) -> Run:
        done = subprocess.run(
            [BASH, str(SCRIPT), str(self.bin / "python")],
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        log = self.log.read_text().splitlines() if self.log.exists() else []
        return Run(done.returncode, log, done.stdout, done.stderr)


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    return Machine(tmp_path)


def assert_one_line_saying_what_to_install(run: Run) -> None:
    assert run.status == 1
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("ensure-browser: ")
    assert "apt-get install chromium" in lines[0]
    assert "-m playwright install chromium" in lines[0]
    assert "the explorer's browser tests will fail" in lines[0]


# --- a browser is already there: nothing is run ---------------------------------------------


def test_chromium_on_path_runs_nothing(machine: Machine) -> None:
    machine.stub("chromium", "id", "sudo", "apt-get", "python")
    run = machine.run(STUB_UID="0")
    assert (run.status, run.log, run.stdout, run.stderr) == (0, [], "", "")


def test_usr_bin_chromium_runs_nothing(machine: Machine) -> None:
    machine.stub("id", "sudo", "apt-get", "python")
    usr_bin_chromium = machine.root / "usr-bin-chromium"
    usr_bin_chromium.write_text(f"#!{BASH}\n")
    usr_bin_chromium.chmod(0o755)
    run = machine.run(STUB_UID="0")
    assert (run.status, run.log, run.stderr) == (0, [], "")


def test_memoryquest_chromium_runs_nothing(machine: Machine) -> None:
    machine.stub("id", "sudo", "apt-get", "python")
    browser = machine.root / "my-chromium"
    browser.write_text(f"#!{BASH}\n")
    browser.chmod(0o755)
    run = machine.run(STUB_UID="0", MEMORYQUEST_CHROMIUM=str(browser))
    assert (run.status, run.log, run.stderr) == (0, [], "")


def test_memoryquest_chromium_not_executable_is_one_line(machine: Machine) -> None:
    """The tests would use that path first, so installing another browser would not help."""
    machine.stub("id", "sudo", "apt-get", "python")
    run = machine.run(STUB_UID="0", MEMORYQUEST_CHROMIUM=str(machine.root / "missing"))
    assert run.status == 1
    assert run.log == []
    assert len(run.stderr.splitlines()) == 1
    assert "MEMORYQUEST_CHROMIUM=" in run.stderr and "missing" in run.stderr


def test_playwright_chromium_already_downloaded_installs_nothing(machine: Machine) -> None:
    machine.stub("id", "sudo", "apt-get", "python")
    run = machine.run(STUB_UID="0", STUB_PLAYWRIGHT_HAS_CHROMIUM="0")
    assert (run.status, run.log, run.stderr) == (0, [PLAYWRIGHT_CHECK], "")


# --- Debian's chromium via apt-get ----------------------------------------------------------


def test_root_with_apt_installs_debian_chromium(machine: Machine) -> None:
    machine.stub("id", "sudo", "apt-get", "python")
    run = machine.run(STUB_UID="0")
    assert run.status == 0, run.stderr
    assert run.log == [PLAYWRIGHT_CHECK, "id -u", APT_UPDATE, APT_INSTALL]
    assert run.stderr == ""


def test_passwordless_sudo_with_apt_installs_debian_chromium(machine: Machine) -> None:
    machine.stub("id", "sudo", "apt-get", "python")
    run = machine.run(STUB_UID="1000")
    assert run.status == 0, run.stderr
    assert run.log == [
        PLAYWRIGHT_CHECK,
        "id -u",
        "sudo -n true",
        f"sudo -n {APT_UPDATE}",
        APT_UPDATE,
        f"sudo -n {APT_INSTALL}",
        APT_INSTALL,
    ]
    assert run.stderr == ""


def test_failed_apt_update_falls_back_to_playwright(machine: Machine) -> None:
    machine.stub("id", "sudo", "apt-get", "python")
    run = machine.run(STUB_UID="0", STUB_APT_STATUS="100")
    assert run.status == 0, run.stderr
    assert run.log == [PLAYWRIGHT_CHECK, "id -u", APT_UPDATE, PLAYWRIGHT_INSTALL]


# --- Playwright's download ------------------------------------------------------------------


def test_no_root_no_sudo_installs_playwright_chromium(machine: Machine) -> None:
    machine.stub("id", "apt-get", "python")
    run = machine.run(STUB_UID="1000")
    assert run.status == 0, run.stderr
    assert run.log == [PLAYWRIGHT_CHECK, "id -u", PLAYWRIGHT_INSTALL]
    assert run.stderr == ""


def test_sudo_asking_for_a_password_installs_playwright_chromium(machine: Machine) -> None:
    machine.stub("id", "sudo", "apt-get", "python")
    run = machine.run(STUB_UID="1000", STUB_SUDO_STATUS="1")
    assert run.status == 0, run.stderr
    assert run.log == [PLAYWRIGHT_CHECK, "id -u", "sudo -n true", PLAYWRIGHT_INSTALL]


def test_no_apt_installs_playwright_chromium_even_as_root(machine: Machine) -> None:
    machine.stub("id", "sudo", "python")
    run = machine.run(STUB_UID="0")
    assert run.status == 0, run.stderr
    assert run.log == [PLAYWRIGHT_CHECK, PLAYWRIGHT_INSTALL]


# --- nothing works: status 1 and one line on stderr -----------------------------------------


def test_apt_and_playwright_failing_is_one_line(machine: Machine) -> None:
    machine.stub("id", "sudo", "apt-get", "python")
    run = machine.run(STUB_UID="0", STUB_APT_STATUS="100", STUB_PLAYWRIGHT_INSTALL_STATUS="1")
    assert run.log == [PLAYWRIGHT_CHECK, "id -u", APT_UPDATE, PLAYWRIGHT_INSTALL]
    assert_one_line_saying_what_to_install(run)


def test_no_root_and_playwright_failing_is_one_line(machine: Machine) -> None:
    machine.stub("id", "apt-get", "python")
    run = machine.run(STUB_UID="1000", STUB_PLAYWRIGHT_INSTALL_STATUS="1")
    assert run.log == [PLAYWRIGHT_CHECK, "id -u", PLAYWRIGHT_INSTALL]
    assert_one_line_saying_what_to_install(run)


def test_no_python_and_no_apt_is_one_line(machine: Machine) -> None:
    machine.stub("id")
    run = machine.run(STUB_UID="0")
    assert run.log == []
    assert_one_line_saying_what_to_install(run)


# --- wiring -----------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_test_runs_the_script_before_the_tests() -> None:
    planned = subprocess.run(
        ["make", "-n", "-C", str(REPO_ROOT), "test"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.splitlines()
    ensure = next(i for i, line in enumerate(planned) if "scripts/ensure-browser.sh" in line)
    pytest_run = next(i for i, line in enumerate(planned) if line.endswith("/pytest -q"))
    assert ensure < pytest_run
    assert planned[ensure].split()[:2] == ["scripts/ensure-browser.sh", ".venv/bin/python"]
