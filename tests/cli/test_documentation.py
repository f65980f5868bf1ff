"""The README and the sample config document every command, option and exit code."""

import os
import re

from tests.helpers import ROOT


def test_readme_documents_every_option_and_exit_code(run_flowrate):
    readme = (ROOT / "README.md").read_text()
    commands = [
        ["eval"], ["validate"], ["agreement"], ["merge"], ["report"], ["compare"], ["metrics"], ["calibrate"],
        ["trends"], ["labels", "template"], ["labels", "import"], ["history", "import"], ["cache", "stats"],
        ["batch", "status"], ["batch", "collect"], ["batch", "cancel"], ["batch", "import-results"], ["judge-bench"], ["align"],
        ["review"], ["top-issues"],
    ]  # fmt: skip
    for command in commands:
        help_text = run_flowrate(*command, "--help", env=dict(os.environ, COLUMNS="200")).stdout
        assert "Usage:" in help_text, command
        for option in set(re.findall(r"(--[a-z][a-z-]+)", help_text)) - {"--help"}:
            assert f"`{option}" in readme, f"README does not document {' '.join(command)} {option}"
        assert f"flowrate {' '.join(command)}" in readme, f"README does not document flowrate {' '.join(command)}"
    for code in ("0", "1", "2", "3", "130", "141"):
        assert re.search(rf"^\| `?{code}`? \|", readme, re.MULTILINE), f"README does not document exit code {code}"


def test_the_config_sample_lists_every_option():
    from flowrate.settings.options import EvalSettings

    sample = (ROOT / "configs" / "flowrate.yaml").read_text()
    listed = set(re.findall(r"^# ([a-z_]+):", sample, re.MULTILINE))
    assert listed == set(EvalSettings.model_fields)
