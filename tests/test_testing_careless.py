"""The careless model: every fault a real model makes is caught by its gate, n of n."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryquest.testing.careless import GATES, Fault, catch, main, table


@pytest.mark.parametrize("fault", list(Fault))
async def test_each_gate_catches_every_fault_written_into_the_answers(
    fault: Fault, tmp_path: Path, clean_settings_env: pytest.MonkeyPatch
) -> None:
    result = await catch(fault, ["user0"], tmp_path)
    assert result.gate == GATES[fault]
    assert result.injected > 0, f"{fault} was never written into an answer"
    assert result.caught == result.injected
    assert f"| {fault.value} |" in table([result])


def test_an_unknown_fault_is_refused_with_the_known_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["--faults", "typos"])
    assert exit.value.code == 2
    assert "foreshadow" in capsys.readouterr().err
