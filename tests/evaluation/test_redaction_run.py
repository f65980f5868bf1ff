"""`flowrate eval --redact` end to end against the scripted judge: no planted identifier in what
the judge received nor in any file the run wrote (rows, cache, history, Parquet, HTML, JUnit),
read as each file's reader reads it; the counts on the rows and in the summary; a rerun answered
by the cache; `flowrate redact` writing what would be sent."""

import json
import re
import sqlite3
import xml.etree.ElementTree as ElementTree

import duckdb
import orjson
import yaml

from tests.helpers import local_eval, read_rows, write_jsonl
from tests.redaction_cases import PLANTED, PLANTED_CONVERSATIONS, PLANTED_IN_IDS, RULES

REPORTS = ("--history", "h.duckdb", "--html", "report.html", "--junit", "junit.xml", "--output-parquet", "out.parquet")


def planted_inputs(tmp_path):
    write_jsonl(tmp_path / "c.jsonl", PLANTED_CONVERSATIONS)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"redact_rules": RULES}), encoding="utf-8")
    return "c.jsonl"


def readings(path):
    """The text of a file as its readers read it: its bytes as UTF-8, and decoded by its kind
    (a JSON line's strings, the HTML page's data, JUnit's XML text, a database's values)."""
    raw = path.read_bytes()
    yield raw.decode("utf-8", errors="replace")
    if path.suffix in (".jsonl", ".json"):
        for line in raw.splitlines():
            if line.strip():
                yield json.dumps(orjson.loads(line), ensure_ascii=False)
    elif path.suffix == ".html":
        data = re.search(r'<script type="application/json" id="data">(.*?)</script>', raw.decode(), re.DOTALL)
        yield json.dumps(json.loads(data.group(1)), ensure_ascii=False)
    elif path.suffix == ".xml":
        yield " ".join(ElementTree.tostring(ElementTree.fromstring(raw), encoding="unicode", method="text").split())
        yield ElementTree.tostring(ElementTree.fromstring(raw), encoding="unicode")
    elif path.suffix in (".duckdb", ".parquet"):
        yield database_text(path)
    elif path.suffix == ".sqlite3":
        with sqlite3.connect(path) as db:
            yield "\n".join(
                value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)
                for line in db.iterdump()
                for value in [line]
            )
            for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                for row in db.execute(f'SELECT * FROM "{table}"').fetchall():
                    yield " ".join(
                        value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)
                        for value in row
                    )


def database_text(path):
    connection = duckdb.connect(str(path), read_only=True) if path.suffix == ".duckdb" else duckdb.connect()
    try:
        if path.suffix == ".parquet":
            return str(connection.execute(f"SELECT * FROM read_parquet('{path}')").fetchall())
        tables = connection.execute("SELECT table_name FROM information_schema.tables").fetchall()
        return "\n".join(str(connection.execute(f'SELECT * FROM "{name}"').fetchall()) for (name,) in tables)
    finally:
        connection.close()


def leaks(texts):
    """The planted identifiers found in `texts` (in any case), those of the ids too."""
    text = "\n".join(texts).lower()
    return sorted(value for values in [*PLANTED.values(), PLANTED_IN_IDS] for value in values if value.lower() in text)


def written_texts(tmp_path):
    inputs = {tmp_path / "c.jsonl", tmp_path / "rules.yaml"}
    for path in sorted(tmp_path.rglob("*")):
        if path.is_file() and path not in inputs:
            yield from readings(path)


def judge_texts(judge):
    return [json.dumps(body, ensure_ascii=False) for body in judge.bodies]


def test_a_redacted_run_sends_and_writes_none_of_the_planted_identifiers(judge, run_flowrate, tmp_path):
    path = planted_inputs(tmp_path)
    result = run_flowrate(*local_eval(judge, path, "--redact", "--config", "rules.yaml", *REPORTS))
    assert result.returncode == 0, result.stderr
    assert judge.requests == len(PLANTED_CONVERSATIONS)
    assert leaks(judge_texts(judge)) == []
    written = list(written_texts(tmp_path))
    assert {path.name for path in tmp_path.rglob("*") if path.is_file()} >= {
        "out.jsonl", "h.duckdb", "report.html", "junit.xml", "out.parquet", "responses.sqlite3",
    }  # fmt: skip
    assert leaks(written) == []
    assert "<EMAIL_1>" in "\n".join(judge_texts(judge)) and "<ORDER_1>" in "\n".join(judge_texts(judge))
    page = (tmp_path / "report.html").read_text()
    assert "&lt;EMAIL_1&gt;" in page or "\\u003cEMAIL_1\\u003e" in page  # the transcripts are there, redacted
    assert "report my manager" in page  # found again by its redacted id


def test_without_redact_the_same_files_hold_the_identifiers(judge, run_flowrate, tmp_path):
    path = planted_inputs(tmp_path)
    result = run_flowrate(*local_eval(judge, path, *REPORTS))
    assert result.returncode == 0, result.stderr
    assert leaks(judge_texts(judge)) == sorted(value for values in PLANTED.values() for value in values)
    assert "whatsapp:+14155552671" in {row["id"] for row in read_rows(tmp_path / "out.jsonl")}
    assert "John.Doe@Example.com" in leaks(written_texts(tmp_path))


def test_each_row_records_what_was_replaced_and_the_summary_the_totals(judge, run_flowrate, tmp_path):
    path = planted_inputs(tmp_path)
    result = run_flowrate(*local_eval(judge, path, "--redact", "--config", "rules.yaml"))
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert rows["pt-cadastro"]["redactions"] == {"CNPJ": 2, "CPF": 2, "DOB": 1, "EMAIL": 1, "IBAN": 2, "PHONE": 2}
    hr = next(row for row in rows.values() if row["id"].startswith("whatsapp:"))
    assert re.fullmatch(r"whatsapp:<PHONE_[0-9a-f]{12}>", hr["id"]) and hr["redactions"] == {}
    assert rows["en-billing"]["redacted_by"].startswith("flowrate-patterns 2; phonenumbers ")
    totals = {}
    for row in rows.values():
        for kind, count in row["redactions"].items():
            totals[kind] = totals.get(kind, 0) + count
    shown = ", ".join(f"{kind} {count}" for kind, count in sorted(totals.items()))
    assert f"redacted before judging, in 4 conversation(s): {shown}" in result.stderr
    assert "names and street addresses are not redacted" in result.stderr


def test_a_rerun_of_a_redacted_run_is_answered_by_the_cache(judge, run_flowrate, tmp_path):
    path = planted_inputs(tmp_path)
    first = run_flowrate(*local_eval(judge, path, "--redact", "--config", "rules.yaml"))
    assert first.returncode == 0, first.stderr
    assert judge.requests == len(PLANTED_CONVERSATIONS)
    second = run_flowrate(*local_eval(judge, path, "--redact", "--config", "rules.yaml"))
    assert second.returncode == 0, second.stderr
    assert judge.requests == len(PLANTED_CONVERSATIONS)
    assert all(row["cached"] for row in read_rows(tmp_path / "out.jsonl"))


def test_the_parquet_copy_keeps_the_counts_as_a_map(judge, run_flowrate, tmp_path):
    path = planted_inputs(tmp_path)
    run_flowrate(*local_eval(judge, path, "--redact", "--output-parquet", "out.parquet"))
    connection = duckdb.connect()
    found = connection.execute(
        f"SELECT redactions['CPF'], redacted_by FROM read_parquet('{tmp_path / 'out.parquet'}') WHERE id = 'pt-cadastro'"
    ).fetchall()
    assert found[0][0] == 2 and found[0][1].startswith("flowrate-patterns 2")


def test_conversations_tagged_hr_are_left_out_with_exclude(judge, run_flowrate, tmp_path):
    path = planted_inputs(tmp_path)
    result = run_flowrate(*local_eval(judge, path, "--redact", "--exclude", "category=HR"))
    assert result.returncode == 0, result.stderr
    assert {row["id"] for row in read_rows(tmp_path / "out.jsonl")} == {"en-billing", "pt-cadastro", "ru-dostavka"}
    assert not any("harassment" in text for text in judge_texts(judge))


def test_flowrate_redact_writes_what_would_be_sent_without_judging(judge, run_flowrate, tmp_path):
    path = planted_inputs(tmp_path)
    result = run_flowrate("redact", path, "-o", "redacted.jsonl", "--config", "rules.yaml")
    assert result.returncode == 0, result.stderr
    assert judge.requests == 0
    records = [orjson.loads(line) for line in (tmp_path / "redacted.jsonl").read_bytes().splitlines()]
    assert [record["id"] for record in records][:3] == [record["id"] for record in PLANTED_CONVERSATIONS][:3]
    assert re.fullmatch(r"whatsapp:<PHONE_[0-9a-f]{12}>", records[3]["id"])
    assert leaks(readings(tmp_path / "redacted.jsonl")) == []
    assert records[1]["turns"][0]["input"] == "Olá, meu CPF é <CPF_1> e o e-mail <EMAIL_1>."
    assert records[1]["redactions"]["CPF"] == 2
    assert "4 conversation(s) redacted to redacted.jsonl: CARD 4," in result.stderr
    judged = run_flowrate(*local_eval(judge, "redacted.jsonl"))  # the file is an input flowrate reads
    assert judged.returncode == 0, judged.stderr


def test_flowrate_redact_leaves_an_existing_output_as_it_was_when_the_input_is_bad(run_flowrate, tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"id": "a", "turns": []}\n', encoding="utf-8")
    (tmp_path / "redacted.jsonl").write_text("kept\n", encoding="utf-8")
    result = run_flowrate("redact", "bad.jsonl", "-o", "redacted.jsonl")
    assert result.returncode == 2
    assert "bad.jsonl:1" in result.stderr and "Traceback" not in result.stderr
    assert (tmp_path / "redacted.jsonl").read_text() == "kept\n"


def test_flowrate_report_redacts_the_transcripts_of_redacted_rows_unless_keep_originals(judge, run_flowrate, tmp_path):
    path = planted_inputs(tmp_path)
    run_flowrate(*local_eval(judge, path, "--redact", "--config", "rules.yaml"))
    result = run_flowrate("report", "out.jsonl", "--html", "page.html", "--inputs", path, "--config", "rules.yaml")
    assert result.returncode == 0, result.stderr
    assert leaks(readings(tmp_path / "page.html")) == []
    assert "redacted before judging, in 4 conversation(s)" in (tmp_path / "page.html").read_text()
    assert "report my manager" in "\n".join(readings(tmp_path / "page.html"))  # found again by its redacted id
    kept = run_flowrate("report", "out.jsonl", "--html", "kept.html", "--inputs", path, "--keep-originals")
    assert kept.returncode == 0, kept.stderr
    assert "529.982.247-25" in "\n".join(readings(tmp_path / "kept.html"))
    assert "report my manager" in "\n".join(readings(tmp_path / "kept.html"))


def test_flowrate_report_without_the_runs_config_leaves_out_a_transcript_it_cannot_redact_as_the_run_did(
    judge, run_flowrate, tmp_path
):
    # the run's config redacted order numbers and a project's name; the report, not given it, would
    # show them: that transcript is left out, and the command says why
    path = planted_inputs(tmp_path)
    run_flowrate(*local_eval(judge, path, "--redact", "--config", "rules.yaml"))
    result = run_flowrate("report", "out.jsonl", "--html", "page.html", "--inputs", path)
    assert result.returncode == 0, result.stderr
    assert leaks(readings(tmp_path / "page.html")) == []
    assert "1 transcript(s) of redacted rows left out" in result.stderr
    assert "Olá, meu CPF é <CPF_1>" in "\n".join(readings(tmp_path / "page.html"))  # redacted as the run did: shown


def test_a_batch_export_of_a_redacted_run_holds_none_of_the_planted_identifiers(judge, run_flowrate, tmp_path):
    path = planted_inputs(tmp_path)
    result = run_flowrate(*local_eval(judge, path, "--redact", "--config", "rules.yaml", "--batch-export", "b.jsonl"))
    assert result.returncode == 0, result.stderr
    assert "<CPF_1>" in (tmp_path / "b.jsonl").read_text(encoding="utf-8")
    assert leaks(readings(tmp_path / "b.jsonl")) == []


def test_flowrate_redact_in_the_environment_turns_redaction_on(judge, run_flowrate, cli_env, tmp_path):
    path = planted_inputs(tmp_path)
    result = run_flowrate(
        *local_eval(judge, path), env={**cli_env, "FLOWRATE_REDACT": "1", "FLOWRATE_CONFIG": "rules.yaml"}
    )
    assert result.returncode == 0, result.stderr
    assert all(row["redactions"] is not None for row in read_rows(tmp_path / "out.jsonl"))
    assert leaks(judge_texts(judge)) == []


def test_rows_imported_from_a_redacted_export_carry_its_counts(judge, run_flowrate, tmp_path):
    path = planted_inputs(tmp_path)
    run_flowrate(*local_eval(judge, path, "--redact", "--config", "rules.yaml", "--batch-export", "b.jsonl"))
    lines = []
    for raw in (tmp_path / "b.jsonl").read_bytes().splitlines():
        reply = json.dumps({"reason": "fine", "key_issues": [], "verdict": "mostly"})
        body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}], "usage": {}}
        lines.append({"custom_id": orjson.loads(raw)["custom_id"], "response": {"status_code": 200, "body": body}})
    (tmp_path / "answers.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = run_flowrate(
        "batch", "import-results", "answers.jsonl", path, "--api-base", judge.base_url, "--model", "smol",
        "-o", "rows.jsonl", "--redact", "--config", "rules.yaml",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = {row["id"]: row for row in read_rows(tmp_path / "rows.jsonl")}
    assert rows["ru-dostavka"]["redactions"] == {"DOB": 2, "EMAIL": 1, "IBAN": 2, "INN": 2, "PHONE": 3, "SNILS": 2}
    assert leaks(readings(tmp_path / "rows.jsonl")) == []


def test_a_submitted_batch_is_collected_redacted_as_it_was_submitted(batch_server, judge, run_flowrate, tmp_path):
    from tests.helpers import batch_args

    planted_inputs(tmp_path)
    submitted = run_flowrate(*batch_args(batch_server, "--batch-submit-only", "--redact", "--config", "rules.yaml"))
    assert submitted.returncode == 0, submitted.stderr
    collected = run_flowrate("batch", "collect")
    assert collected.returncode == 0, collected.stderr
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert rows["pt-cadastro"]["redactions"] == {"CNPJ": 2, "CPF": 2, "DOB": 1, "EMAIL": 1, "IBAN": 2, "PHONE": 2}
    config_terms = {value.lower() for value in PLANTED["PROJECT"]}  # the config's own rule, kept with the command
    assert [value for value in leaks(written_texts(tmp_path)) if value.lower() not in config_terms] == []
    uploaded = [content.decode("utf-8") for content in batch_server.files.values()]  # the provider's files
    assert "<CPF_1>" in "\n".join(uploaded) and leaks(uploaded) == []


def test_a_redacted_run_with_a_history_leaves_out_what_it_judged_before(judge, run_flowrate, tmp_path):
    path = planted_inputs(tmp_path)
    args = ("--redact", "--config", "rules.yaml", "--history", "h.duckdb")
    first = run_flowrate(*local_eval(judge, path, *args))
    assert first.returncode == 0, first.stderr
    before = (tmp_path / "out.jsonl").read_bytes()
    again = run_flowrate(*local_eval(judge, path, *args, "--junit", "again.xml"))
    assert again.returncode == 2 and "nothing to judge" in again.stderr, again.stderr
    assert f"skipped {len(PLANTED_CONVERSATIONS)} already judged conversation(s) (--history)" in again.stderr
    assert (tmp_path / "out.jsonl").read_bytes() == before
    assert leaks([again.stderr]) == []  # the skipped ids are told redacted


def test_a_call_logs_conversation_key_holding_a_phone_is_redacted_in_every_file_and_the_report(
    judge, run_flowrate, tmp_path
):
    from tests.inputs.sources.sdk_logs import openai_chat_calls

    key = "whatsapp:+14155552671"  # the conversation key, as a WhatsApp bot logs its calls
    write_jsonl(tmp_path / "calls.jsonl", openai_chat_calls(metadata={"conversation_id": key}))
    result = run_flowrate(*local_eval(judge, "calls.jsonl", "--redact", *REPORTS))
    assert result.returncode == 0, result.stderr
    [row] = read_rows(tmp_path / "out.jsonl")
    assert re.fullmatch(r"whatsapp:<PHONE_[0-9a-f]{12}>", row["id"])
    written = [text for path in sorted(tmp_path.rglob("*")) if path.is_file() and path.name != "calls.jsonl"
               for text in readings(path)]  # fmt: skip
    assert "4155552671" not in "\n".join([*written, *judge_texts(judge), result.stderr])
    assert "Paris" in "\n".join(readings(tmp_path / "report.html"))  # its transcript, found by the redacted id


def test_a_key_in_a_tool_calls_json_arguments_and_a_password_in_an_env_line_reach_no_judge_nor_file(
    judge, run_flowrate, tmp_path
):
    from tests.inputs.sources.sdk_logs import openai_chat_calls

    # the OpenAI SDK's calls of a weather bot whose tool takes the weather service's key, as JSON
    # arguments; and a .env line a user pasted
    calls = json.dumps(openai_chat_calls()).replace(
        '{\\"city\\":\\"Paris\\"}', '{\\"city\\":\\"Paris\\",\\"api_key\\":\\"abc123def456ghi789\\"}'
    )
    assert "abc123def456ghi789" in calls
    (tmp_path / "calls.jsonl").write_text("".join(json.dumps(call) + "\n" for call in json.loads(calls)))
    pasted = {"input": "my .env has DB_PASSWORD=hunter2x, and the app fails", "actual_output": "Let me check."}
    write_jsonl(tmp_path / "c.jsonl", [{"id": "env", "turns": [pasted]}])
    result = run_flowrate(*local_eval(judge, "calls.jsonl", "c.jsonl", "--redact", *REPORTS))
    assert result.returncode == 0, result.stderr
    sent = "\n".join(judge_texts(judge))
    assert "DB_PASSWORD=<SECRET_1>" in sent
    written = [text for path in sorted(tmp_path.rglob("*")) if path.is_file() and path.suffix != ".jsonl"
               for text in readings(path)]  # fmt: skip
    written += [*readings(tmp_path / "out.jsonl"), result.stderr]
    assert [value for value in ("abc123def456ghi789", "hunter2x") if value in sent + "\n".join(written)] == []
    rows = read_rows(tmp_path / "out.jsonl")
    assert {row["id"] for row in rows} >= {"env"} and all(row["redactions"] == {"SECRET": 1} for row in rows)
    assert re.search(r"api_key\W+<SECRET_1>", sent)  # the tool call the judge reads, its key replaced
