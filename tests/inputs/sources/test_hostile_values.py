"""Any field of a platform's record set to a value of another type (null, a number, a boolean,
text, a list, an object) is read into conversations or named problems, never an exception: each
fixture with each field, and each field of its JSON columns, replaced in turn."""

import copy
import csv
import io
import json

import pytest

from tests.inputs.sources.platforms import FIXTURES, read

ODD = [None, 1.5, True, "x", [1], {"a": 1}]


def _paths(value, path=()):
    if path:
        yield path
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from _paths(child, (*path, key))


def _replaced(document, path, new):
    changed = copy.deepcopy(document)
    target = changed
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new
    return changed


def _all_read(path):
    for record in read(path):
        assert record.case is not None or record.problems


@pytest.mark.parametrize(
    "name", ["sharegpt.json", "intercom.json", "zendesk.json", "rasa_tracker.json", "servicenow.json"]
)
def test_every_field_of_a_json_record_set_to_another_type_is_read_or_named(name, tmp_path):
    document = json.loads((FIXTURES / name).read_text())
    target = tmp_path / name
    for path in _paths(document):
        for new in ODD:
            target.write_text(json.dumps(_replaced(document, path, new)))
            _all_read(target)


@pytest.mark.parametrize("name", ["rasa_events.csv", "dialogflow_cx.csv"])
def test_every_cell_and_json_field_of_a_table_set_to_another_type_is_read_or_named(name, tmp_path):
    with (FIXTURES / name).open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    target = tmp_path / name
    for number, row in enumerate(rows):
        for column, cell in row.items():
            variants = [str(new) for new in ODD]
            if cell.startswith("{"):
                cell_json = json.loads(cell)
                variants += [json.dumps(_replaced(cell_json, path, new)) for path in _paths(cell_json) for new in ODD]
            for variant in variants:
                changed = copy.deepcopy(rows)
                changed[number][column] = variant
                text = io.StringIO()
                writer = csv.DictWriter(text, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows(changed)
                target.write_text(text.getvalue())
                _all_read(target)
