"""Top issues: key issues grouped into failure modes, ranked by severity then frequency, and
each mode's trend over a history of runs."""

import random
from datetime import UTC, datetime

import orjson
import pytest

from flowrate.analysis.history import connect, import_results
from flowrate.analysis.top_issues import (
    EXACT_LIMIT,
    TopIssues,
    _shown,
    _turn_in,
    _turn_reference,
    _words,
    load_top_issues,
    top_issues,
)
from tests.analysis.planted_issues import PLAN, PLANTED, issue_row, planted_mode, planted_rows


def shown_text(text):
    """A key issue as a label shows it: no turn reference, no quoted or numbered values."""
    return _shown(_turn_reference(text)[1])


def issue_turn(text):
    """The turn a key issue names at its start, as grouping reads it."""
    return _turn_in(text, _turn_reference(text)[0])


def grouping_text(text):
    """What grouping compares of a key issue: `shown_text`, lower case, words only."""
    return _words(shown_text(text))


def _planted_sequence(modes):
    """The planted modes in the order the found modes rank them, each once."""
    return list(dict.fromkeys(planted_mode(mode.ids[0]) for mode in modes))


def test_a_planted_run_comes_back_as_its_modes_in_the_planted_ranking():
    modes = top_issues(planted_rows())
    for mode in modes:
        assert len({planted_mode(key) for key in mode.ids}) == 1, (mode.label, mode.ids)
    for planted, spec in PLAN.items():
        covered = {key for mode in modes if planted_mode(mode.ids[0]) == planted for key in mode.ids}
        assert len(covered) == spec["conversations"]
    assert _planted_sequence(modes) == PLANTED
    # one language's wording stays one mode: at most a mode per language, and a stray at most
    assert len(modes) <= 3 * len(PLANTED) + 1
    assert all(len(mode.examples) == 3 for mode in modes)
    assert sum(mode.conversations for mode in modes) == sum(spec["conversations"] for spec in PLAN.values())


def test_a_planted_run_of_more_distinct_texts_than_one_exact_clustering_takes_comes_back_as_its_modes():
    # 25 times the planted run, each issue naming two things its conversation was about
    plan = {mode: {**spec, "conversations": spec["conversations"] * 25} for mode, spec in PLAN.items()}
    rows = planted_rows(plan=plan, topics=True)
    run = TopIssues(rows)
    assert len(run.grouping.texts) > EXACT_LIMIT  # so it is grouped in rounds
    modes = run.modes()
    for mode in modes:
        assert len({planted_mode(key) for key in mode.ids}) == 1, (mode.label, mode.ids[:5])
    for planted, spec in plan.items():
        covered = {key for mode in modes if planted_mode(mode.ids[0]) == planted for key in mode.ids}
        assert len(covered) == spec["conversations"]
    assert _planted_sequence(modes) == PLANTED
    assert len(modes) <= 3 * len(PLANTED) + 1
    shuffled = rows[:]
    random.Random(3).shuffle(shuffled)
    assert [mode.as_json() for mode in top_issues(shuffled)] == [mode.as_json() for mode in modes]


def test_modes_name_their_metrics_turns_and_shares():
    modes = top_issues(planted_rows())
    hanging = [mode for mode in modes if planted_mode(mode.ids[0]) == "hanging"]
    assert all(mode.position == "end" for mode in hanging)
    assert all(mode.metrics == ["conversational_flow_rate", "request_completion"] for mode in hanging)
    order = [mode for mode in modes if planted_mode(mode.ids[0]) == "order_again"]
    assert all(mode.position == "start" and mode.typical_turn in (1, 2) for mode in order)
    total = 212  # 192 planted conversations and 20 without an issue
    assert all(mode.share == round(mode.conversations / total, 4) for mode in modes)
    example = hanging[0].examples[0]
    row = next(r for r in planted_rows() if r.id == example.id and example.text in r.key_issues)
    assert example.turn == row.number_of_turns  # the exact turn and text of the row


def test_the_same_rows_in_any_order_give_the_same_modes_and_labels():
    rows = planted_rows()
    first = [mode.as_json() for mode in top_issues(rows)]
    for seed in (1, 2):
        shuffled = rows[:]
        random.Random(seed).shuffle(shuffled)
        assert [mode.as_json() for mode in top_issues(shuffled)] == first


def test_two_runs_over_the_same_rows_give_the_same_labels_and_another_draw_the_same_ranking():
    assert [m.label for m in top_issues(planted_rows(seed=7))] == [m.label for m in top_issues(planted_rows(seed=7))]
    # other wordings, turns and values drawn for the same planted modes: the same modes, ranked alike
    assert _planted_sequence(top_issues(planted_rows(seed=8))) == PLANTED
    assert _planted_sequence(top_issues(planted_rows(seed=9))) == PLANTED


def test_a_loop_found_by_the_repetition_check_is_labelled_without_the_husk_of_its_percentage():
    from flowrate.inputs.conversation import ConversationalEvalTestCase
    from flowrate.metrics.repetition import findings

    reply = "Your parcel is on its way and arrives {} working days from today."
    rows = []
    for n, days in enumerate(["two", "three", "four"]):
        turns = [
            {"input": "where is my parcel", "actual_output": reply.format(days)},
            {"input": "and when exactly", "actual_output": reply.format(days + "!" * n)},
        ]
        found = findings(ConversationalEvalTestCase(id=f"c{n}", turns=turns))
        assert found and "% alike)" in found[0]  # what repetition_check writes: "(95% alike)"
        rows.append(issue_row(f"c{n}", 0.6, found, turns=2, metric="repetition_check"))
    assert [mode.label for mode in top_issues(rows)] == ["repeats the reply"]
    assert shown_text("turn 4: quotes a price (12 USD) the user never saw") == "quotes a price the user never saw"


def test_turn_references_and_quoted_values_are_not_what_makes_issues_the_same():
    assert issue_turn("turns 1 and 3: asks for the booking number") == 1
    assert issue_turn("Turn 12 - loops") == 12
    assert issue_turn("asks twice") is None
    same = [
        "turn 3: asks again for the order number 77812 given in turn 2",
        "turn 5: asks again for the order number #4471 given in turn 1",
        'Turn 1: asks again for the order number "A-5521" given in turn 1',
        "turn 2: asks again for the order number 'ZX 90' given in turns 1 and 2",
    ]
    assert len({grouping_text(text) for text in same}) == 1
    assert shown_text(same[0]) == "asks again for the order number given"
    assert shown_text("turn 4: asks for the email ana.souza@example.com again, see https://x.example/a") == (
        "asks for the email again, see"
    )
    assert grouping_text("ход 2: снова спрашивает номер заказа «88213», уже названный в ходе 1") == (
        "снова спрашивает номер заказа уже названный"
    )
    # the same order number and turn in two different failures leave them two modes
    rows = [
        issue_row(f"a{n}", 0.3, [f"turn 3: asks again for order number 77812 (ref #{n}, in turn {n})"])
        for n in range(6)
    ] + [
        issue_row(f"b{n}", 0.3, [f"turn 3: pitches the premium plan for order 77812 (ref #{n}, in turn {n})"])
        for n in range(6)
    ]
    modes = top_issues(rows)
    assert sorted(sorted({key[0] for key in mode.ids}) for mode in modes) == [["a"], ["b"]]


# the assistant repeating its own earlier reply, and asking again for what the user gave: several
# phrasings of each, as judges write them, in English, Portuguese and Russian
LOOP = [
    "repeats the reply of turn {t} word for word",
    "gives the same answer as in turn {t} again",
    "repeats its previous reply verbatim",
    "sends the same reply it gave in turn {t}",
    "repete a resposta do turno {t} palavra por palavra",
    "dá a mesma resposta do turno {t} outra vez",
    "repete a mesma resposta que deu no turno {t}",
    "повторяет ответ из хода {t} слово в слово",
    "снова даёт тот же ответ, что и в ходе {t}",
    "повторяет свой предыдущий ответ дословно",
]
RE_ASK = [
    "asks again for the order number {n} the user gave in turn {t}",
    "repeats the question after the user already answered it",
    "repeats the question the user answered in turn {t}",
    "asks again for the email the user already gave",
    "repete a pergunta depois que o usuário já respondeu",
    "pede de novo o número do pedido {n} que o usuário deu no turno {t}",
    "repete a pergunta que o usuário já respondeu no turno {t}",
    "повторяет вопрос, на который пользователь уже ответил",
    "снова спрашивает номер заказа {n}, который пользователь назвал в ходе {t}",
    "повторяет вопрос, хотя пользователь ответил в ходе {t}",
]


def test_a_loop_and_a_re_ask_are_different_modes():
    rng = random.Random(1)
    rows = planted_rows()  # among other failures, as in a real run
    for kind, wordings in (("loop", LOOP), ("re_ask", RE_ASK)):
        for index in range(30):
            turn = rng.randint(2, 6)
            text = wordings[index % len(wordings)].format(t=turn - 1, n=rng.choice(["77812", "#4471", "'ZX-90'"]))
            rows.append(issue_row(f"{kind}-{index}", rng.choice([0.3, 0.0]), [f"turn {turn}: {text}"]))
    modes = top_issues(rows)
    kinds = [{key.split("-")[0] for key in mode.ids} & {"loop", "re_ask"} for mode in modes]
    assert set().union(*kinds) == {"loop", "re_ask"}
    assert [mode.texts for mode, found in zip(modes, kinds, strict=True) if len(found) > 1] == []


def test_issues_of_only_one_and_two_letter_words_still_form_modes():
    rows = [issue_row(f"c{n}", 0.3, [f"turn 2: {text}"]) for n, text in enumerate(["ok", "no", "ok"])]
    assert sorted((mode.label, mode.conversations) for mode in top_issues(rows)) == [("no", 1), ("ok", 2)]


def test_an_end_of_conversation_lapse_is_more_severe_than_the_same_lapse_at_the_start():
    at_end = top_issues(
        [issue_row(f"c{n}", 0.3, ["turn 6: ignores the user's question about the refund"]) for n in range(5)]
    )
    at_start = top_issues(
        [issue_row(f"c{n}", 0.3, ["turn 1: ignores the user's question about the refund"]) for n in range(5)]
    )
    assert at_end[0].severity > at_start[0].severity
    # in one run: the same scores and as many conversations, the lapse at the end ranks first
    rows = [issue_row(f"s{n}", 0.3, ["turn 1: pitches the premium plan instead of helping"]) for n in range(6)]
    rows += [issue_row(f"e{n}", 0.3, ["turn 6: the user's last question gets no reply"]) for n in range(6)]
    ranked = top_issues(rows)
    assert [mode.ids[0][0] for mode in ranked] == ["e", "s"]
    assert [mode.position for mode in ranked] == ["end", "start"]


def test_frequency_breaks_a_severity_tie():
    rows = [issue_row(f"few{n}", 0.3, ["turn 3: pitches the premium plan instead of helping"]) for n in range(3)]
    rows += [issue_row(f"many{n}", 0.3, ["turn 3: ignores the user's question about the refund"]) for n in range(9)]
    ranked = top_issues(rows)
    assert ranked[0].severity == ranked[1].severity
    assert [mode.conversations for mode in ranked] == [9, 3]


def test_user_satisfaction_rows_and_rows_without_issues_raise_no_mode():
    rows = [
        issue_row("a", 1.0, []),
        issue_row("b", 0.2, ["turn 2: loops on the same question"], metric="user_satisfaction"),
    ]
    assert top_issues(rows) == []
    assert top_issues([]) == []


def _write_run(path, rows):
    path.write_bytes(b"".join(orjson.dumps(row.model_dump(mode="json")) + b"\n" for row in rows))
    return path


def test_a_history_of_three_runs_shows_a_planted_mode_growing_flagged(tmp_path):
    weeks = [
        datetime(2026, 11, 2, 9, tzinfo=UTC),
        datetime(2026, 11, 9, 9, tzinfo=UTC),
        datetime(2026, 11, 16, 9, tzinfo=UTC),
    ]
    upsells = [6, 15, 45]  # of 100 conversations each week: 6 %, 15 %, 45 %
    history = tmp_path / "history.duckdb"
    connection = connect(history)
    for week, (day, upsell) in enumerate(zip(weeks, upsells, strict=True)):
        plan = {
            "refund": {"conversations": 30, "scores": [0.3], "where": "middle"},
            "upsell": {"conversations": upsell, "scores": [0.7], "where": "middle"},
        }
        rows = planted_rows(seed=week, day=day, plan=plan)
        rows += [issue_row(f"fine-{week}-{n}", 1.0, [], day=day) for n in range(100 - 20 - 30 - upsell)]
        for row in rows:
            row.id = f"w{week}-{row.id}"  # each week's conversations are its own
        import_results(connection, _write_run(tmp_path / f"run{week}.jsonl", rows))
    connection.close()
    modes = load_top_issues(history=str(history), by="week", growth=0.05).modes()
    upsell_modes = [mode for mode in modes if "upsell" in mode.ids[0]]
    refund_modes = [mode for mode in modes if "refund" in mode.ids[0]]
    assert upsell_modes and refund_modes
    for mode in modes:
        assert [point.period for point in mode.trend] == ["2026-W45", "2026-W46", "2026-W47"]
    # matched across runs by its members: each language's upsell mode holds all three weeks' conversations
    assert sum({key.split("-")[0] for key in mode.ids} == {"w0", "w1", "w2"} for mode in upsell_modes) >= 2
    growing = [mode for mode in upsell_modes if mode.growing]
    assert growing, [(mode.label, [p.share for p in mode.trend]) for mode in upsell_modes]
    assert all(not mode.growing for mode in refund_modes)
    total = sum(point.conversations for mode in upsell_modes for point in mode.trend)
    assert total == sum(upsells)
    assert all("trend" in mode.as_json(trend=True) for mode in modes)


def test_a_history_from_before_key_issues_were_kept_gives_no_modes_and_no_error(tmp_path):
    history = tmp_path / "old.duckdb"
    connection = connect(history)
    connection.execute("UPDATE rows SET key_issues = NULL")
    rows = [issue_row(f"c{n}", 0.3, ["turn 2: loops"]) for n in range(3)]
    import_results(connection, _write_run(tmp_path / "run.jsonl", rows))
    connection.execute("UPDATE rows SET key_issues = NULL, number_of_turns = NULL")
    connection.close()
    run = load_top_issues(history=str(history))
    assert run.modes() == [] and run.conversations == 3


def test_migration_3_adds_key_issues_to_an_older_history_and_imports_fill_them(tmp_path):
    import duckdb

    from flowrate.analysis.migrations import MIGRATIONS, applied, migrate

    path = tmp_path / "older.duckdb"
    older = duckdb.connect(str(path))
    migrate(older, [m for m in MIGRATIONS if m.__name__ in ("m001_runs_rows_and_labels", "m002_reviews")])
    older.execute(
        "INSERT INTO rows (conversation_id, metric, model, rubric_version, evaluated_at, score)"
        " VALUES ('old', 'conversational_flow_rate', 'm', 'v', '2026-11-01 09:00', 0.3)"
    )
    older.close()
    connection = connect(path)  # upgraded in place
    assert "m003_rows_key_issues" in applied(connection)
    new_rows = [issue_row(f"new{n}", 0.3, ["turn 6: the user's last question gets no reply"]) for n in range(3)]
    import_results(connection, _write_run(tmp_path / "new.jsonl", new_rows))
    stored = connection.execute("SELECT key_issues, number_of_turns FROM rows ORDER BY conversation_id").fetchall()
    connection.close()
    assert stored == [('["turn 6: the user\'s last question gets no reply"]', 6)] * 3 + [(None, None)]  # "old" kept
    run = load_top_issues(history=str(path))
    [mode] = run.modes()
    assert mode.ids == ["new0", "new1", "new2"] and mode.position == "end"
    assert run.conversations == 4 and mode.share == 0.75


def test_the_library_call_reads_results_files_as_the_command_does(tmp_path):
    from flowrate import api

    rows = planted_rows()
    path = _write_run(tmp_path / "run.jsonl", rows)
    from_file = api.top_issues([str(path)], by="week")
    assert [mode.as_json() for mode in from_file] == [mode.as_json() for mode in top_issues(rows)]
    assert all(len(mode.trend) == 1 and not mode.growing for mode in from_file)


def test_a_naming_reply_counts_each_mode_once_and_ignores_numbers_out_of_range():
    import pytest

    from flowrate.analysis.judged.mode_naming import NamingError, read_naming

    reply = '{"modes": [{"merge": [1, 2], "label": " A  name "}, {"merge": [2, 9, 3], "label": "B"}, {"merge": [], "label": "C"}]}'
    assert read_naming(reply, 3) == [([1, 2], "A name"), ([3], "B")]
    assert read_naming("```json\n" + reply + "\n```", 3)[0][1] == "A name"  # fenced, as small models reply
    for unusable in ("no JSON at all", '{"modes": []}', '{"modes": [{"merge": [7], "label": "x"}]}'):
        with pytest.raises(NamingError):
            read_naming(unusable, 3)


# the pair of issue 25 as a judge wrote it: they share only their verb
ISSUE_LOOP = "turn 3: repeats the reply of turn 1"
ISSUE_RE_ASK = "turn 4: repeats the question after the user answered"


@pytest.mark.parametrize("copies", [1, 3])
@pytest.mark.parametrize("among_others", [False, True])
def test_two_issues_that_share_only_their_verb_are_different_modes(copies, among_others):
    rows = planted_rows() if among_others else []
    rows += [issue_row(f"loop-{n}", 0.3, [ISSUE_LOOP]) for n in range(copies)]
    rows += [issue_row(f"re_ask-{n}", 0.3, [ISSUE_RE_ASK]) for n in range(copies)]
    kinds = [sorted({key.split("-")[0] for key in mode.ids} & {"loop", "re_ask"}) for mode in top_issues(rows)]
    assert sorted(found for found in kinds if found) == [["loop"], ["re_ask"]]
