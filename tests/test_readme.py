"""The README's two commands stay the ones CI and newcomers run."""

from __future__ import annotations

import re

from .conftest import REPO


def readme_commands() -> list[str]:
    blocks = re.findall(r"```\n(.*?)\n```", (REPO / "README.md").read_text(), re.S)
    return [b.strip() for b in blocks[:2]]


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    main_job, test_command = readme_commands()
    assert "pytest" in test_command and "scripts/main_job.sh" in main_job
    ci_lines = (REPO / ".ci" / "run").read_text().splitlines()
    assert test_command in ci_lines


def test_main_job_script_exists_and_is_executable() -> None:
    script = REPO / "scripts" / "main_job.sh"
    assert script.is_file() and script.stat().st_mode & 0o111
