"""The docs document every command, option and exit code: the CLI reference is generated from
the Typer app (`python docs/reference.py`), and this fails when it is stale."""

import os
import re
import runpy

from tests.helpers import ROOT


def reference():
    return runpy.run_path(str(ROOT / "docs" / "reference.py"))


def test_the_cli_reference_page_is_generated_from_the_current_help():
    page = (ROOT / "docs" / "cli.md").read_text()
    assert page == reference()["render"](), "docs/cli.md is stale: run python docs/reference.py"


def test_the_cli_reference_shows_every_option_of_every_command():
    page = reference()["render"]()
    for command in ("eval", "review", "judge-bench", "batch import-results", "labels template", "cache clear"):
        assert f"## `flowrate {command}`" in page
    assert "--max-cost" in page and "FLOWRATE_MODEL" in page


def test_the_readme_names_every_command_and_exit_code():
    readme = (ROOT / "README.md").read_text()
    page = reference()["render"]()
    leaves = [
        path
        for path in re.findall(r"^## `flowrate (.+)`$", page, re.MULTILINE)
        if path not in ("batch", "labels", "history", "cache")
    ]
    for path in leaves:
        group, _, name = path.partition(" ")
        assert f"flowrate {path}" in readme or (name and f"flowrate {group} " in readme and name in readme), path
    for code in ("0", "1", "2", "3", "4", "130", "141", "143"):
        assert re.search(rf"^\| `?{code}`? \|", readme, re.MULTILINE), f"README does not document exit code {code}"


def test_the_readme_stays_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


def test_the_config_sample_lists_every_option():
    from flowrate.settings.options import EvalSettings

    sample = (ROOT / "configs" / "flowrate.yaml").read_text()
    listed = set(re.findall(r"^# ([a-z_]+):", sample, re.MULTILINE))
    assert listed == set(EvalSettings.model_fields)


def test_the_commands_page_copies_no_option_of_eval_and_sends_the_reader_to_the_reference():
    # the page held a hand copy of eval's 62 options, which went stale as options were added:
    # every option is in docs/cli.md, generated; the page keeps only what the help cannot say
    section = (ROOT / "docs" / "commands.md").read_text().split("### `flowrate eval PATH...`", 1)[1].split("\n### ")[0]
    assert "](cli.md#flowrate-eval)" in section
    assert re.findall(r"^\|.*`--[a-z]", section, re.MULTILINE) == []  # no table row of an option
    assert "\n## `flowrate eval`\n" in reference()["render"]()  # the anchor #flowrate-eval


def test_the_option_table_of_judge_bench_holds_exactly_its_command_s_options(run_flowrate):
    # a global search let `judge-bench --transport` go undocumented and `--version` (the app's)
    # sit in eval's table: the table of the Commands page is held to its own command's --help
    readme = (ROOT / "docs" / "commands.md").read_text()
    for command, heading in (("judge-bench", "### `flowrate judge-bench"),):
        section = readme.split(heading, 1)[1].split("\n### ", 1)[0]
        first_cells = re.findall(r"^\| ([^|]*`--[^|]*)\|", section, re.MULTILINE)
        documented = {option for cell in first_cells for option in re.findall(r"`(--[a-z][a-z-]+)", cell)}
        help_text = run_flowrate(command, "--help", env=dict(os.environ, COLUMNS="200")).stdout
        offered = set(re.findall(r"(--[a-z][a-z-]+)", help_text)) - {"--help"}
        assert documented == offered, (command, sorted(documented - offered), sorted(offered - documented))


def test_eval_help_says_directories_hold_parquet_too_and_that_ray_urls_need_rays_client(run_flowrate):
    help_text = " ".join(run_flowrate("eval", "--help", env=dict(os.environ, COLUMNS="200")).stdout.split())
    assert ".jsonl/.json/.yaml/.yml/.parquet inside" in help_text
    assert "ray://HOST:10001, which needs pip install 'ray[client]'" in help_text


def _pages_a_user_reads():
    """The README and the docs pages of the site's "Getting started" and "Using flowrate"."""
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    pages = []
    for entry in nav:
        for title, value in entry.items():
            if title in ("Getting started", "Using flowrate"):
                pages += [value] if isinstance(value, str) else [page for item in value for page in item.values()]
    return {"README.md": (ROOT / "README.md").read_text()} | {
        page: (ROOT / "docs" / page).read_text() for page in pages
    }


def test_no_page_a_user_reads_runs_a_command_on_data_outside_the_project():
    pages = _pages_a_user_reads()
    assert {"README.md", "getting-started.md", "commands.md", "metrics.md", "judges.md"} <= set(pages)
    assert [name for name, text in pages.items() if "../shared/" in text] == []


def test_a_page_that_runs_a_command_on_the_human_rated_sets_says_where_they_come_from():
    from flowrate.analysis.judge_bench import SETS

    pages = _pages_a_user_reads()
    for name, text in pages.items():
        if re.search(r"dialogue-ratings[/ ]", text):
            assert "#getting-the-sets" in text, name
    getting = pages["commands.md"].split("#### Getting the sets", 1)[1].split("\n#", 1)[0]
    assert {bench.file for bench in SETS.values()} <= set(re.findall(r"`(\w+\.jsonl)`", getting))


def test_getting_started_shows_a_first_verdict_without_an_openai_key():
    page = (ROOT / "docs" / "getting-started.md").read_text()
    section = page.split("## A first verdict without an OpenAI key", 1)[1].split("\n## ", 1)[0]
    assert "OPENAI_API_KEY" not in section
    assert "--metric repetition_check" in page and "offline repetition check" in section
    for way in ("--model gguf:", "--api-base http://127.0.0.1:", "--model ollama:"):
        assert way in section, way
