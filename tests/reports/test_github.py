"""GitHub's step summary and annotations, as its runner parses stdout and stderr (a line starting
with `::` after trimming is a workflow command) and as Markdown renders the summary."""

from html.parser import HTMLParser

from flowrate.reports.escape import strip_control
from tests.helpers import turn_record, workflow_commands, write_jsonl

COMMAND_IDS = [
    "::error title=x::y",
    "  ::stop-commands::tok3n",
    "\u3000::warning::wide space",
    "##[error]legacy",
    "x\r::error::after a carriage return",
    "bell\x07 and \x1b[31mred\x1b[0m, 100%",
]


class _Tags(HTMLParser):
    """The tags of rendered HTML, its headings' text and its table cells' text."""

    def __init__(self):
        super().__init__()
        self.opened, self.headings, self.cells, self._text = set(), [], [], None

    def handle_starttag(self, tag, attrs):
        self.opened.add(tag)
        if tag in ("h2", "h3", "td"):
            self._text = []

    def handle_endtag(self, tag):
        if self._text is not None and tag in ("h2", "h3", "td"):
            (self.headings if tag != "td" else self.cells).append("".join(self._text))
            self._text = None

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)


def test_github_summary_and_annotations_when_the_environment_says_github(judge, run_flowrate, tmp_path, cli_env):
    judge.script("MARK-NONE", {"verdict": "none", "key_issues": ["turn 1: 100% off, ignores: the user\nentirely"]})
    records = [turn_record(f"f{n},x:y", "MARK-NONE", "x") for n in range(12)] + [turn_record("ok", "hi", "hello")]
    write_jsonl(tmp_path / "c.jsonl", records)
    summary_file = tmp_path / "step-summary.md"
    summary_file.write_text("earlier step\n")
    env = dict(cli_env, GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary_file))
    result = run_flowrate("eval", "c.jsonl", "--api-base", judge.base_url, "-o", "out.jsonl", env=env)
    assert result.returncode == 1
    text = summary_file.read_text()
    assert text.startswith("earlier step\n## flowrate") and "| `conversational_flow_rate` | 13 | 7.7% |" in text
    assert "### Worst failures" in text and len(text.encode()) < 1024 * 1024
    errors = [line for line in result.stdout.splitlines() if line.startswith("::error ")]
    assert len(errors) == 10
    assert errors[0] == (
        "::error file=c.jsonl,line=1,title=flowrate conversational_flow_rate%3A f0%2Cx%3Ay::"
        "none: turn 1: 100%25 off, ignores: the user%0Aentirely"
    )
    assert result.stdout.splitlines()[-1] == "::notice::2 more failing rows; see the step summary"


def test_the_step_summary_is_cut_under_1_mib():
    from flowrate.reports.github import cut

    text = "".join(f"| line {n} |\n" for n in range(200_000))
    kept = cut(text, 1024 * 1024)
    assert len(kept.encode()) <= 1024 * 1024 and kept.endswith("limited to 1 MiB)_\n")
    assert "| line 0 |" in kept


def test_annotation_paths_are_relative_to_the_workspace_however_the_input_was_named(
    judge, run_flowrate, tmp_path, cli_env
):
    judge.script("MARK-NONE", {"verdict": "none", "key_issues": ["turn 1: ignores"]})
    (tmp_path / "sub").mkdir()
    write_jsonl(tmp_path / "sub" / "c.jsonl", [turn_record("bad", "MARK-NONE", "x")])
    env = dict(cli_env, GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"))
    env.pop("GITHUB_WORKSPACE", None)
    named = ["sub/c.jsonl", "./sub/c.jsonl", "sub/../sub/c.jsonl", str(tmp_path / "sub" / "c.jsonl")]
    for name in named:
        result = run_flowrate("eval", name, "--api-base", judge.base_url, "-o", "out.jsonl", "--github", env=env)
        [(_, properties, _)] = workflow_commands(result.stdout)
        assert properties["file"] == "sub/c.jsonl", name
    workspace = dict(env, GITHUB_WORKSPACE=str(tmp_path.parent))
    result = run_flowrate(
        "eval", "./sub/c.jsonl", "--api-base", judge.base_url, "-o", "o.jsonl", "--github", env=workspace
    )
    [(_, properties, _)] = workflow_commands(result.stdout)
    assert properties["file"] == f"{tmp_path.name}/sub/c.jsonl"


def test_ids_and_reasons_never_start_a_workflow_command_on_stdout_or_stderr(judge, run_flowrate, tmp_path, cli_env):
    judge.script(
        "MARK-CMD",
        {
            "verdict": "none",
            "reason": "::error::reason\n::warning::second line ##[stop-commands]x",
            "key_issues": ["turn 1: \n::error file=a,line=1::issue\r\n  ::add-mask::x"],
        },
    )
    write_jsonl(tmp_path / "c.jsonl", [turn_record(key, "MARK-CMD", "x") for key in COMMAND_IDS])
    summary_file = tmp_path / "summary.md"
    env = dict(cli_env, GITHUB_STEP_SUMMARY=str(summary_file))
    result = run_flowrate(
        "eval", "c.jsonl", "--api-base", judge.base_url, "-o", "out.jsonl", "--github", "--verbose", env=env
    )
    assert result.returncode == 1, result.stderr
    assert "failed:" in result.stderr  # the summary named the failures, ids and all
    assert workflow_commands(result.stderr) == []
    commands = workflow_commands(result.stdout)
    assert [name for name, _, _ in commands] == ["error"] * len(COMMAND_IDS)
    for (_, properties, data), key in zip(commands, COMMAND_IDS, strict=True):
        assert properties == {
            "file": "c.jsonl",
            "line": str(COMMAND_IDS.index(key) + 1),
            "title": f"flowrate conversational_flow_rate: {strip_control(key)}",
        }
        assert data.startswith("none: turn 1: ")


def test_a_file_name_quoted_in_an_input_error_never_starts_a_workflow_command(run_flowrate, tmp_path):
    name = "::warning title=x::evil.jsonl"
    (tmp_path / name).write_text('{"id": "a", "turns": []}\n{"id": "b\\n::error::x", "turns": "no"}\n')
    result = run_flowrate("eval", name, "--api-base", "http://127.0.0.1:9/v1")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "evil.jsonl:1" in result.stderr and "evil.jsonl:2" in result.stderr
    assert workflow_commands(result.stderr) == [] and workflow_commands(result.stdout) == []


def test_the_step_summary_shows_the_judges_html_and_markdown_as_text(judge, run_flowrate, tmp_path, cli_env):
    from markdown_it import MarkdownIt

    issue = "turn 1: <img src=https://evil.example/p.png> </td></tr></table><h1>x</h1> ![i](https://e.x/i.png) *em*"
    judge.script("MARK-MD", {"verdict": "none", "key_issues": [issue]})
    conversation_id = "a`\n# heading | <b>bold</b>"
    write_jsonl(tmp_path / "c.jsonl", [turn_record(conversation_id, "MARK-MD", "x")])
    summary_file = tmp_path / "summary.md"
    env = dict(cli_env, GITHUB_STEP_SUMMARY=str(summary_file))
    result = run_flowrate("eval", "c.jsonl", "--api-base", judge.base_url, "-o", "out.jsonl", "--github", env=env)
    assert result.returncode == 1, result.stderr
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(summary_file.read_text())
    tags = _Tags()
    tags.feed(rendered)
    assert {"img", "b", "em", "h1", "a"}.isdisjoint(tags.opened), tags.opened
    assert tags.headings == ["flowrate", "Worst failures"]
    cells = tags.cells[-4:]  # the worst failure's row
    assert cells[0] == " ".join(conversation_id.split()) and cells[3] == issue
