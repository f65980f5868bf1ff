"""`flowrate compare --markdown` as Markdown renders it."""

from tests.helpers import march_row as row
from tests.helpers import write_rows


def test_compare_markdown_renders_a_hostile_id_as_text(run_flowrate, tmp_path):
    from markdown_it import MarkdownIt

    hostile = "x`\n\n### injected heading\n\n<img src=https://evil.example/p.png>\n`![i](https://evil.example/i.png)"
    before = [row(hostile, "a|b`<i>", 0.9, verdict="mostly", model="m`\n# model heading")]
    after = [row(hostile, "a|b`<i>", 0.3, verdict="minor<img src=x>")]
    write_rows(tmp_path / "before.jsonl", before)
    write_rows(tmp_path / "after.jsonl", after)
    result = run_flowrate("compare", "before.jsonl", "after.jsonl", "--markdown")
    assert result.returncode == 0, result.stderr
    tokens = MarkdownIt("commonmark").enable("table").parse(result.stdout)
    flat = [token for token in tokens] + [child for token in tokens for child in token.children or []]
    headings = [tokens[i + 1].content for i, token in enumerate(tokens) if token.type == "heading_open"]
    assert headings == ["flowrate: compared with the baseline"]
    assert [token.type for token in flat if token.type in ("image", "html_inline", "html_block", "link_open")] == []
    text = "".join(token.content for token in flat if token.type == "text")
    assert "### injected heading" in text and "<img src=https://evil.example/p.png>" in text
    assert "minor<img src=x>" in text and "# model heading" in text


def test_compare_markdown_says_how_many_regressions_it_leaves_out(run_flowrate, tmp_path):
    write_rows(tmp_path / "before.jsonl", [row(f"c{n:02d}", "a", 0.9, verdict="mostly") for n in range(25)])
    write_rows(tmp_path / "after.jsonl", [row(f"c{n:02d}", "a", 0.3, verdict="minor") for n in range(25)])
    result = run_flowrate("compare", "before.jsonl", "after.jsonl", "--markdown")
    listed = [line for line in result.stdout.splitlines() if line.startswith("- c")]
    assert len(listed) == 20 and "- and 5 more (`flowrate compare --json` lists every change)" in result.stdout
