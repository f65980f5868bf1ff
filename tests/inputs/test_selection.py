"""Which conversations a run judges: invalid records skipped, the sample, limits and filters, shards,
and a selection of nothing."""

import json
import shutil

import pytest

from tests.helpers import distinct, ids, read_rows, turn_record, write_jsonl


def test_skip_invalid_judges_the_rest_and_lists_the_skipped(judge, run_flowrate, tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps(turn_record("ok", "a", "b")) + "\n" + '{"id": "x", "turns": []}\n')
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "--skip-invalid", "-o", "out.jsonl")
    assert result.returncode == 0, result.stderr
    assert [row["id"] for row in read_rows(tmp_path / "out.jsonl")] == ["ok"]
    assert "skipped 1" in result.stderr and f"{path}:2: turns: must not be empty" in result.stderr
    assert judge.requests == 1


def test_a_run_that_selects_no_conversation_exits_2_unless_allowed(judge, run_flowrate, tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "a.jsonl").write_text("\n")
    (tmp_path / "bad.jsonl").write_text('{"turns": []}\n')
    for args, stdin in (
        (["empty.jsonl"], None),
        (["dir"], None),
        (["-"], ""),
        (["bad.jsonl", "--skip-invalid"], None),
    ):
        result = run_flowrate("eval", *args, "--api-base", judge.base_url, input=stdin)
        assert result.returncode == 2, (args, result.stderr)
        assert "nothing to judge" in result.stderr and args[0].replace("-", "") in result.stderr
    allowed = run_flowrate("eval", "empty.jsonl", "--api-base", judge.base_url, "--allow-empty")
    assert allowed.returncode == 0 and judge.requests == 0


@pytest.mark.parametrize(
    "args, reason",
    [(["--sample", "0.5"], "--sample"), (["--limit", "3"], "--limit"), (["--min-words", "6"], "--min-words")],
)
def test_filters_choose_the_same_conversations_every_run(judge, run_flowrate, tmp_path, args, reason):
    records = distinct(20) + [turn_record("long", "a b c d e f g", "h i j k")]
    write_jsonl(tmp_path / "c.jsonl", records)
    chosen = []
    for output in ("one.jsonl", "two.jsonl"):
        result = run_flowrate("eval", "c.jsonl", *args, "--api-base", judge.base_url, "-o", output)
        assert result.returncode == 0, result.stderr
        chosen.append(sorted(row["id"] for row in read_rows(tmp_path / output)))  # rows come in completion order
        assert f"left out by the selection (not errors): {reason} {21 - len(chosen[-1])}" in result.stderr
    assert chosen[0] == chosen[1] and 0 < len(chosen[0]) < 21


def test_only_and_exclude_filter_on_metadata(judge, run_flowrate, tmp_path):
    records = [
        {**turn_record("hr", "q1", "a"), "metadata": {"topic": "HR"}},
        {**turn_record("it", "q2", "a"), "metadata": {"topic": "IT"}},
        {**turn_record("handoff", "q3", "a"), "metadata": {"topic": "IT", "immediate_handoff": True}},
    ]
    write_jsonl(tmp_path / "c.jsonl", records)
    result = run_flowrate(
        "eval",
        "c.jsonl",
        "--exclude",
        "topic=HR",
        "--exclude",
        "immediate_handoff=true",
        "--api-base",
        judge.base_url,
        "-o",
        "o.jsonl",
    )
    assert [row["id"] for row in read_rows(tmp_path / "o.jsonl")] == ["it"] and result.returncode == 0
    assert "--exclude 2" in result.stderr
    only = run_flowrate("eval", "c.jsonl", "--only", "topic=HR", "--api-base", judge.base_url, "-o", "p.jsonl")
    assert [row["id"] for row in read_rows(tmp_path / "p.jsonl")] == ["hr"] and only.returncode == 0
    bad = run_flowrate("eval", "c.jsonl", "--only", "topic")
    assert bad.returncode == 2 and "'topic' must be FIELD=VALUE" in bad.stderr


def test_a_sample_is_the_same_across_shards(judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", distinct(40))
    whole = run_flowrate("eval", "c.jsonl", "--sample", "0.5", "--api-base", judge.base_url, "-o", "all.jsonl")
    assert whole.returncode == 0
    parts = []
    for index in (1, 2):
        run_flowrate(
            "eval",
            "c.jsonl",
            "--sample",
            "0.5",
            "--shard",
            f"{index}/2",
            "--api-base",
            judge.base_url,
            "-o",
            f"s{index}.jsonl",
        )
        parts += [row["id"] for row in read_rows(tmp_path / f"s{index}.jsonl")]
    assert sorted(parts) == sorted(row["id"] for row in read_rows(tmp_path / "all.jsonl"))


def test_shards_and_merge_cover_every_id_once(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(30))
    for index in (1, 2, 3):
        result = run_flowrate(
            "eval", path, "--api-base", judge.base_url, "--shard", f"{index}/3", "-o", f"shard{index}.jsonl"
        )
        assert result.returncode == 0, result.stderr
    shards = [ids(read_rows(tmp_path / f"shard{i}.jsonl")) for i in (1, 2, 3)]
    assert all(shards) and sorted(sum(shards, [])) == ids(distinct(30))
    merged = run_flowrate("merge", "shard1.jsonl", "shard2.jsonl", "shard3.jsonl", "-o", "all.jsonl")
    assert merged.returncode == 0 and "passed 30" in merged.stderr
    assert ids(read_rows(tmp_path / "all.jsonl")) == ids(distinct(30))
    shutil.copyfile(tmp_path / "shard1.jsonl", tmp_path / "copy1.jsonl")  # the same rows in another file
    twice = run_flowrate("merge", "shard1.jsonl", "copy1.jsonl", "-o", "bad.jsonl")
    assert twice.returncode == 2 and "is also in shard1.jsonl" in twice.stderr
    assert run_flowrate("eval", path, "--shard", "4/3").returncode == 2
