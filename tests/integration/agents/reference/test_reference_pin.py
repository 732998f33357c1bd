"""Building an agent folder that asks for the reference's protocol release by name.

The reference's agents say ``agentenv-framework-protocol[agent]==0.1.379`` (with the ``[agent]``
extra). Our hermetic build must then yield to that pin (no injection of our wheel); otherwise its
``PIP_CONSTRAINT`` would pin the name to our wheel and ``pip install`` fail on the conflict.
"""

from __future__ import annotations

from pathlib import Path

from agent_env.images.plan import plan_build

PLAIN = "agentenv-framework-protocol==0.1.379\n"
WITH_EXTRA = "agentenv-framework-protocol[agent]==0.1.379\n"


def folder_with(tmp_path: Path, requirements: str) -> Path:
    (tmp_path / "requirements.txt").write_text(requirements)
    (tmp_path / "Dockerfile").write_text(
        "FROM python:3.11-slim\nCOPY requirements.txt /tmp/\n"
        "RUN pip install -r /tmp/requirements.txt\n")
    return tmp_path


def test_the_fixture_agents_requirements_get_the_pypi_release(build_state_root: Path) -> None:
    here = Path(__file__).parent / "reference_agent"
    plan = plan_build(here)
    assert plan.wheel is None  # no injection: pip installs 0.1.379 from PyPI
    assert any("agentenv-framework-protocol[agent]==0.1.379 is not this repository's protocol" in n
               for n in plan.notes)


def test_a_plain_pin_yields(build_state_root: Path, tmp_path: Path) -> None:
    assert plan_build(folder_with(tmp_path, PLAIN)).wheel is None


def test_a_pin_with_the_agent_extra_yields(build_state_root: Path, tmp_path: Path) -> None:
    assert plan_build(folder_with(tmp_path, WITH_EXTRA)).wheel is None
