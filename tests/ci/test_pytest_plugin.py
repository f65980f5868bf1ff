"""The pytest plugin, run by pytest's own pytester against the scripted judge on 127.0.0.1."""

import json
import socket
import xml.etree.ElementTree as ET

import pytest

from tests.helpers import CHROMIUM, CHROMIUM_ARGS, HOSTILE_IDS, turn_record, watched, workflow_commands, write_jsonl

FOUR_LINES = """
import flowrate

def test_refund_flow():
    flowrate.assert_flow({"turns": [{"input": "I want a REFUND", "actual_output": "%s"}]}, at_least="partial")
"""

IGNORED = {
    "verdict": "minor",
    "reason": "The assistant never answers the refund question.",
    "key_issues": ["Turn 1: the refund is not mentioned", "Turn 1: asks for the order number twice"],
}


def test_a_four_line_test_fails_with_the_reason_and_turns_passes_when_fixed_and_a_rerun_sends_nothing(
    judged_project, judge
):
    judge.script("What is your order number", IGNORED)
    judged_project.makepyfile(test_bot=FOUR_LINES % "What is your order number? What is your order number?")
    failed = judged_project.runpytest_inprocess()
    failed.assert_outcomes(failed=1)
    report = failed.stdout.str()
    assert "AssertionError: flowrate: the judge failed the conversation" in report
    assert "judged minor (score 0.30), needs at least partial (0.70)" in report
    assert "reason: The assistant never answers the refund question." in report
    assert "- Turn 1: the refund is not mentioned" in report
    assert "flowrate/ci/" not in report  # the assertion report points at the test, not the plugin
    assert judge.requests == 1

    judged_project.makepyfile(test_bot=FOUR_LINES % "Your refund of 20 EUR is on its way.")
    judged_project.runpytest_inprocess().assert_outcomes(passed=1)
    assert judge.requests == 2

    judged_project.runpytest_inprocess().assert_outcomes(passed=1)  # a second session: from the cache
    assert judge.requests == 2


def test_the_fixture_takes_openai_messages_and_a_score_to_reach(judged_project, judge):
    judge.script("late delivery", {"verdict": "mostly", "reason": "Fine but slow.", "key_issues": []})
    judged_project.makepyfile(
        test_bot="""
        def test_messages(flowrate):
            messages = [{"role": "user", "content": "late delivery"}, {"role": "assistant", "content": "Sorry!"}]
            rows = flowrate.assert_flow(messages, at_least=0.9)
            assert rows[0].verdict == "mostly"

        def test_too_high(flowrate):
            messages = [{"role": "user", "content": "late delivery"}, {"role": "assistant", "content": "Sorry!"}]
            flowrate.assert_flow(messages, at_least="fully")
        """
    )
    result = judged_project.runpytest_inprocess()
    result.assert_outcomes(passed=1, failed=1)
    assert "judged mostly (score 0.90), needs at least fully (1.00)" in result.stdout.str()


def test_a_judge_that_gives_no_verdict_is_an_error_not_a_failure(judged_project, judge):
    judge.script("broken judge", {"content": "this is not JSON"})
    judged_project.makepyfile(
        test_bot="""
        def test_broken(flowrate):
            flowrate.assert_flow({"turns": [{"input": "broken judge", "actual_output": "hello"}]})
        """
    )
    result = judged_project.runpytest_inprocess("--junitxml=junit.xml")
    result.assert_outcomes(errors=1)
    report = result.stdout.str()
    assert "flowrate: the judge gave no verdict: conversational_flow_rate:" in report
    assert "Traceback" not in report and "flowrate/ci/" not in report
    case = ET.parse(judged_project.path / "junit.xml").getroot().find(".//testcase")
    properties = {item.get("name"): item.get("value") for item in case.iter("property")}
    assert properties["flowrate_error"].startswith("conversational_flow_rate:")


def test_a_rejected_key_is_an_error_at_the_setup_of_every_marked_test(judged_project, judge):
    judge.script("question", {"status": 401})
    write_jsonl(
        judged_project.path / "chats.jsonl", [turn_record(f"c{n}", f"question {n}", "answer") for n in range(3)]
    )
    judged_project.makepyfile(
        test_bot="""
        import pytest

        @pytest.mark.flowrate("chats.jsonl")
        def test_chat(flowrate, conversation):
            flowrate.assert_flow(conversation)
        """
    )
    result = judged_project.runpytest_inprocess()
    result.assert_outcomes(errors=3)
    report = result.stdout.str()
    assert "ERROR at setup of test_chat[c0]" in report
    assert "flowrate: the judge gave no verdict: the judge rejected the API key for model 'gpt-4o' (401)" in report
    assert "Traceback" not in report


def test_the_marker_makes_a_test_of_each_conversation_judged_in_one_batch(judged_project, judge):
    judge.script("question 1", IGNORED)
    records = [turn_record(f"chat-{n}", f"question {n}", "answer") for n in range(4)]
    write_jsonl(judged_project.path / "chats.jsonl", records)
    judged_project.makepyfile(
        test_bot="""
        import pytest

        @pytest.mark.flowrate("chats.jsonl", at_least="partial")
        def test_chat(flowrate, conversation):
            flowrate.assert_flow(conversation)
        """
    )
    result = judged_project.runpytest_inprocess("-v", "--flowrate-output", "rows.jsonl", "--junitxml", "junit.xml")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        ["*test_chat?chat-0? PASSED*", "*test_chat?chat-1? FAILED*", "*test_chat?chat-3? PASSED*"]
    )
    assert judge.requests == 4
    rows = [json.loads(line) for line in (judged_project.path / "rows.jsonl").read_text().splitlines()]
    assert sorted(row["id"] for row in rows) == [f"chat-{n}" for n in range(4)]
    assert {row["source"]["path"] for row in rows} == {str(judged_project.path / "chats.jsonl")}
    assert "flowrate rows: rows.jsonl (4 rows)" in result.stdout.str()
    cases = ET.parse(judged_project.path / "junit.xml").getroot().iter("testcase")
    properties = {case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")} for case in cases}
    assert properties["test_chat[chat-1]"]["flowrate_verdict"] == "minor"
    assert properties["test_chat[chat-0]"]["flowrate_score"] == "1.0"
    assert float(properties["test_chat[chat-0]"]["flowrate_cost_usd"]) >= 0


def test_a_deselected_conversation_is_not_judged_and_collecting_judges_nothing(judged_project, judge):
    write_jsonl(
        judged_project.path / "chats.jsonl", [turn_record(f"c{n}", f"question {n}", "answer") for n in range(3)]
    )
    judged_project.makepyfile(
        test_bot="""
        import pytest

        @pytest.mark.flowrate("chats.jsonl")
        def test_chat(conversation, flowrate):
            flowrate.assert_flow(conversation)
        """
    )
    judged_project.runpytest_inprocess("--co").assert_outcomes()
    assert judge.requests == 0
    judged_project.runpytest_inprocess("-k", "not c1").assert_outcomes(passed=2, deselected=1)
    assert judge.requests == 2


def test_a_bad_marked_file_is_a_collection_error_naming_its_line_and_field(judged_project, judge):
    (judged_project.path / "chats.jsonl").write_text('{"id": "a", "turns": [{"input": "hi"}]}\n')
    judged_project.makepyfile(
        test_bot="""
        import pytest

        @pytest.mark.flowrate("chats.jsonl")
        def test_chat(conversation):
            pass
        """
    )
    result = judged_project.runpytest_inprocess()
    result.assert_outcomes(errors=1)
    report = result.stdout.str()
    assert "test_bot.py::test_chat: 1 problem(s) in a file of a flowrate marker:" in report
    assert "chats.jsonl:1: turns[0].actual_output: is missing" in report
    assert "Traceback" not in report and "During handling" not in report
    assert judge.requests == 0


def test_a_budget_skips_what_it_cannot_pay_for(judged_project, judge, monkeypatch):
    monkeypatch.setenv("FLOWRATE_MAX_COST", "0")
    write_jsonl(judged_project.path / "chats.jsonl", [turn_record("c0", "question", "answer")])
    judged_project.makepyfile(
        test_bot="""
        import pytest

        @pytest.mark.flowrate("chats.jsonl")
        def test_chat(conversation, flowrate):
            flowrate.assert_flow(conversation)
        """
    )
    result = judged_project.runpytest_inprocess("-rs", "--flowrate-output", "rows.jsonl")
    result.assert_outcomes(skipped=1)
    assert "flowrate: not judged (budget)" in result.stdout.str()
    assert judge.requests == 0
    assert not (judged_project.path / "rows.jsonl").exists()  # a session that judged nothing wrote nothing


def test_two_hundred_marked_conversations_are_judged_with_the_concurrency_of_flowrate_eval(
    judged_project, judge, run_flowrate, cli_env, monkeypatch, tmp_path
):
    judge.latency_s = 0.05
    records = [turn_record(f"c{n}", f"question {n}", f"answer {n}") for n in range(200)]
    write_jsonl(judged_project.path / "chats.jsonl", records)
    judged_project.makepyfile(
        test_bot="""
        import pytest

        @pytest.mark.flowrate("chats.jsonl")
        def test_chat(conversation, flowrate):
            flowrate.assert_flow(conversation)
        """
    )
    judged_project.chdir()  # run_flowrate went to its own scratch directory
    judged_project.runpytest_inprocess("-q").assert_outcomes(passed=200)
    assert judge.requests == 200
    in_pytest = judge.max_in_flight

    judge.reset()
    cli_env.update(FLOWRATE_API_BASE=judge.base_url, FLOWRATE_CACHE_DIR=str(tmp_path / "eval-cache"))
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "chats.jsonl", records)
    assert run_flowrate("eval", "chats.jsonl", "-o", "out.jsonl").returncode == 0
    assert judge.requests == 200
    assert in_pytest == judge.max_in_flight == 16  # flowrate eval's default --concurrency


def test_under_xdist_each_conversation_is_its_own_test_and_judged_once(judged_project, judge):
    pytest.importorskip("xdist")
    write_jsonl(
        judged_project.path / "chats.jsonl", [turn_record(f"c{n}", f"question {n}", "answer") for n in range(4)]
    )
    judged_project.makepyfile(
        test_bot="""
        import pytest

        @pytest.mark.flowrate("chats.jsonl")
        def test_chat(conversation, flowrate):
            flowrate.assert_flow(conversation)
        """
    )
    result = judged_project.runpytest_subprocess("-n", "2", "-v", "--flowrate-output", "rows.jsonl")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*PASSED*test_chat?c0?*"])
    assert judge.requests == 4
    worker_rows = sorted(judged_project.path.glob("rows.gw*.jsonl"))
    assert sum(len(path.read_text().splitlines()) for path in worker_rows) == 4


def test_the_plugin_imports_nothing_of_flowrate_in_a_project_that_does_not_use_it(pytester):
    """`pytest --co` and a plain test in an unrelated project load the plugin (the entry point)
    and no LiteLLM, pydantic or flowrate module besides the package and the plugin."""
    pytester.makeconftest(
        """
        import json, sys

        def pytest_sessionfinish(session):
            names = sorted(name for name in sys.modules if name.split(".")[0] in ("litellm", "pydantic", "flowrate"))
            open("modules.json", "w").write(json.dumps(names))
        """
    )
    pytester.makepyfile(test_plain="def test_one():\n    assert 1 + 1 == 2\n")
    # langsmith (installed to write the LangSmith fixtures) registers a pytest plugin of its own
    # that imports pydantic: left out, so what is counted is what flowrate's plugin loads
    for args in (["--co"], []):
        result = pytester.runpytest_subprocess(*args, "-p", "no:langsmith_plugin")
        assert result.ret == 0
        assert "flowrate-0.1.0" in result.stdout.str()  # the plugin is loaded
        assert json.loads((pytester.path / "modules.json").read_text()) == [
            "flowrate",
            "flowrate.ci",
            "flowrate.ci.pytest_plugin",
        ]


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs Debian's chromium)")
def test_the_sessions_html_report_shows_each_row_and_its_transcript_with_hostile_text_literal(judged_project, judge):
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright driver is not installed")
    hostile = ["<img src=x onerror=alert(1)>", "</script><script>document.title='owned'</script>"]
    judge.script("question 1", {"verdict": "none", "reason": hostile[0], "key_issues": [f"Turn 1: {hostile[1]}"]})
    records = [turn_record(text, f"question {n}", f"bot says {text}") for n, text in enumerate(hostile)]
    write_jsonl(judged_project.path / "chats.jsonl", records)
    judged_project.makepyfile(
        test_bot="""
        import pytest

        @pytest.mark.flowrate("chats.jsonl")
        def test_chat(conversation, flowrate):
            flowrate.assert_flow(conversation)
        """
    )
    result = judged_project.runpytest_inprocess("--flowrate-html", "report.html")
    result.assert_outcomes(passed=1, failed=1)
    assert "HTML report: report.html" in result.stdout.str()
    errors = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(offline=True)
        context.route("http*://**", lambda route: route.abort())
        page = watched(context.new_page(), errors)
        page.goto((judged_project.path / "report.html").as_uri())
        rows = page.locator("#results tbody tr")
        assert sorted(rows.nth(n).locator("td").first.inner_text() for n in range(2)) == sorted(hostile)
        page.locator("#results tbody tr", has_text="onerror").first.click()
        turn = page.locator("#transcript .turn").first
        assert turn.locator(".assistant").inner_text() == f"assistant: bot says {hostile[0]}"
        assert page.title() != "owned" and page.locator("img").count() == 0
        browser.close()
    assert not errors


def test_an_async_test_can_assert_flow(judged_project, judge):
    judged_project.makepyfile(
        test_bot="""
        import pytest
        import flowrate

        @pytest.mark.asyncio
        async def test_async():
            flowrate.assert_flow([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
        """
    )
    judged_project.runpytest_inprocess().assert_outcomes(passed=1)
    assert judge.requests == 1


def test_the_judge_is_chosen_by_the_config_file_under_the_model_option(judged_project, judge):
    (judged_project.path / "configs").mkdir()
    (judged_project.path / "configs" / "flowrate.yaml").write_text("model: gpt-4o-mini\nlanguage: French\n")
    judged_project.makepyfile(
        test_bot="""
        import flowrate

        def test_one():
            flowrate.assert_flow({"turns": [{"input": "hi", "actual_output": "hello"}]})
        """
    )
    judged_project.runpytest_inprocess().assert_outcomes(passed=1)
    judged_project.runpytest_inprocess("--flowrate-model", "gpt-3.5-turbo").assert_outcomes(passed=1)
    assert [body["model"] for body in judge.bodies] == ["gpt-4o-mini", "gpt-3.5-turbo"]
    assert all("French" in json.dumps(body["messages"]) for body in judge.bodies)


def test_conversations_sharing_an_id_in_two_files_or_two_tests_each_get_their_own_verdict(judged_project, judge):
    judge.script("BROKEN", IGNORED)
    write_jsonl(judged_project.path / "good.jsonl", [turn_record("c0", "question", "fine answer")])
    write_jsonl(judged_project.path / "bad.jsonl", [turn_record("c0", "question", "BROKEN answer")])
    judged_project.makepyfile(
        test_bot="""
        import pytest
        import flowrate

        @pytest.mark.flowrate("good.jsonl")
        def test_good(conversation):
            flowrate.assert_flow(conversation)

        @pytest.mark.flowrate("bad.jsonl")
        def test_bad(conversation):
            flowrate.assert_flow(conversation)

        def test_inline_good():
            flowrate.assert_flow({"id": "same", "turns": [{"input": "q", "actual_output": "fine"}]})

        def test_inline_bad():
            flowrate.assert_flow({"id": "same", "turns": [{"input": "q", "actual_output": "BROKEN"}]})
        """
    )
    result = judged_project.runpytest_inprocess("-v")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(
        ["*test_good?c0? PASSED*", "*test_bad?c0? FAILED*", "*test_inline_good PASSED*", "*test_inline_bad FAILED*"]
    )
    assert judge.requests == 4


def test_flowrate_github_writes_one_step_summary_for_the_session_not_one_per_batch(judged_project, judge, monkeypatch):
    summary = judged_project.path / "summary.md"
    monkeypatch.setenv("FLOWRATE_GITHUB", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    judged_project.makepyfile(
        test_bot="""
        import flowrate

        def test_one():
            flowrate.assert_flow({"turns": [{"input": "hi", "actual_output": "hello"}]})

        def test_two():
            flowrate.assert_flow({"turns": [{"input": "hi again", "actual_output": "hello"}]})
        """
    )
    judged_project.runpytest_inprocess().assert_outcomes(passed=2)
    assert judge.requests == 2 and summary.read_text().count("## flowrate") == 1


def test_under_github_actions_the_summary_and_annotations_name_each_test_and_conversation_at_the_test(
    judged_project, judge, monkeypatch
):
    from flowrate.reports.escape import markdown_text

    summary = judged_project.path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_WORKSPACE", str(judged_project.path))
    judge.script("BROKEN", IGNORED)
    records = [turn_record("c0", "question 0", "answer"), turn_record("c1", "question 1", "BROKEN answer")]
    write_jsonl(judged_project.path / "chats.jsonl", records)
    source = """
        import pytest
        import flowrate

        @pytest.mark.flowrate("chats.jsonl")
        def test_chat(conversation):
            flowrate.assert_flow(conversation)

        def test_inline():
            flowrate.assert_flow({"id": "inline-7", "turns": [{"input": "q", "actual_output": "BROKEN"}]})
        """
    judged_project.makepyfile(test_bot=source)
    result = judged_project.runpytest_inprocess()
    result.assert_outcomes(passed=1, failed=2)
    lines = (judged_project.path / "test_bot.py").read_text().splitlines()
    marked_line = next(n for n, line in enumerate(lines, 1) if line.startswith("@pytest.mark.flowrate"))
    inline_line = next(n for n, line in enumerate(lines, 1) if line.startswith("def test_inline"))
    annotations = [command for command in workflow_commands(result.stdout.str()) if command[0] == "error"]
    assert [properties for _, properties, _ in annotations] == [
        {
            "file": "test_bot.py",
            "line": str(marked_line),
            "title": "flowrate conversational_flow_rate: test_bot.py::test_chat[c1] (conversation c1)",
        },
        {
            "file": "test_bot.py",
            "line": str(inline_line),
            "title": "flowrate conversational_flow_rate: test_bot.py::test_inline (conversation inline-7)",
        },
    ]
    text = summary.read_text()
    assert text.count("## flowrate") == 1
    assert markdown_text("test_bot.py::test_chat[c1] (conversation c1)") in text
    assert markdown_text("test_bot.py::test_inline (conversation inline-7)") in text
    assert "job" not in text + result.stdout.str() and "flowrate-pytest-" not in result.stdout.str()


@pytest.mark.parametrize("style", ["long", "native"])
def test_hostile_ids_and_reasons_in_pytest_s_report_are_no_workflow_command(judged_project, judge, style, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")  # the session's annotations are printed too
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(judged_project.path / "summary.md"))
    judge.script(
        "BROKEN",
        {"verdict": "none", "reason": "first\r::error::reason ##[warning]x", "key_issues": ["Turn 1: \r::add-mask::y"]},
    )
    records = [turn_record(name, f"question {n}", "BROKEN reply") for n, name in enumerate(HOSTILE_IDS)]
    write_jsonl(judged_project.path / "chats.jsonl", records)
    judged_project.makepyfile(
        test_bot="""
        import pytest

        @pytest.mark.flowrate("chats.jsonl")
        def test_chat(flowrate, conversation):
            flowrate.assert_flow(conversation)
        """
    )
    result = judged_project.runpytest_subprocess(f"--tb={style}", "-rA", "-v")
    result.assert_outcomes(failed=len(HOSTILE_IDS))
    log = (judged_project.path / "stdout").read_bytes().decode()  # as printed: CRs kept
    commands = workflow_commands(log)  # the session's annotations, one per failing test, and nothing else
    assert [name for name, _, _ in commands] == ["error"] * len(HOSTILE_IDS)
    assert {properties["file"] for _, properties, _ in commands} == {"test_bot.py"}
    assert "ok\\x0d::error::after a carriage return judged none" in log
    assert "reason: first\\x0d::error::reason ##\\[warning]x" in log


def test_an_unreachable_judge_is_learned_once_and_every_later_test_fails_at_once_with_its_message(
    judged_project, monkeypatch
):
    with socket.socket() as probe:  # a port nothing listens on: every connection is refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("FLOWRATE_API_BASE", f"http://127.0.0.1:{port}/v1")
    judged_project.makepyfile(
        test_bot="""
        import pytest
        import flowrate

        @pytest.mark.parametrize("n", range(4))
        def test_inline(n):
            flowrate.assert_flow({"turns": [{"input": f"question {n}", "actual_output": "answer"}]})
        """
    )
    result = judged_project.runpytest_inprocess("--flowrate-output", "rows.jsonl")
    result.assert_outcomes(errors=4)
    rows = [json.loads(line) for line in (judged_project.path / "rows.jsonl").read_text().splitlines()]
    assert [row["error"]["type"] for row in rows] == ["APIConnectionError"]  # the first test's call alone
    told = [line for line in result.stdout.lines if line.startswith("flowrate: the judge gave no verdict")]
    assert len(told) == 4 and len(set(told)) == 1, told
    assert "the judge could not be reached: APIConnectionError:" in told[0]


def test_a_wrong_at_least_or_metric_fails_the_test_at_once_as_a_usage_error_before_any_call(judged_project, judge):
    write_jsonl(judged_project.path / "chats.jsonl", [turn_record("c0", "question", "answer")])
    judged_project.makepyfile(
        test_bot="""
        import flowrate

        CONVERSATION = {"turns": [{"input": "hi", "actual_output": "hello"}]}

        def test_a_score_above_one():
            flowrate.assert_flow(CONVERSATION, at_least=1.5)

        def test_a_level_of_no_scale():
            flowrate.assert_flow(CONVERSATION, at_least="perfect")

        def test_an_unknown_metric():
            flowrate.assert_flow(CONVERSATION, metric="nope")
        """,
        test_marked="""
        import pytest
        import flowrate

        @pytest.mark.flowrate("chats.jsonl", at_least=2)
        def test_marked(conversation):
            flowrate.assert_flow(conversation)
        """,
    )
    result = judged_project.runpytest_inprocess("--continue-on-collection-errors")
    result.assert_outcomes(failed=3, errors=1)
    report = result.stdout.str()
    assert "assert_flow: at_least=1.5 is not a score in [0, 1]" in report
    assert "assert_flow: at_least='perfect' is not a level of conversational_flow_rate (known: fully, mostly," in report
    assert "assert_flow: option metric: unknown metric 'nope' (known: conversational_flow_rate," in report
    assert "test_marked.py::test_marked: @pytest.mark.flowrate: at_least=2 is not a score in [0, 1]" in report
    assert "the judge gave no verdict" not in report and "Traceback" not in report
    assert judge.requests == 0


def test_the_session_gives_its_cases_to_the_run_in_memory_and_stages_no_input_file(judged_project, judge, monkeypatch):
    import flowrate.api

    given = []
    evaluate_files = flowrate.api.evaluate_files

    def watched_run(paths, *args):  # the run itself, its inputs noted
        given.extend(paths)
        return evaluate_files(paths, *args)

    monkeypatch.setattr(flowrate.api, "evaluate_files", watched_run)
    judged_project.makepyfile(test_bot=FOUR_LINES % "Your refund of 20 EUR is on its way.")
    judged_project.runpytest_inprocess().assert_outcomes(passed=1)
    assert judge.requests == 1
    [inputs] = given
    [record] = inputs.rows()
    assert str(inputs) == "<pytest>" and record["turns"][0]["input"] == "I want a REFUND"
