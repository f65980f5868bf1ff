"""People's answers in the history: each kept the moment it is given, a changed label keeping its
earlier value, each reviewer's latest answer counting as their label."""

from datetime import datetime

from flowrate.analysis.history import connect, stored_labels
from flowrate.analysis.reviews import Review, _reviews, current_reviews, record_review


def test_an_answer_is_on_disk_once_given_and_a_changed_one_keeps_its_earlier_value(tmp_path):
    path = tmp_path / "history.duckdb"
    connection = connect(path)
    record_review(connection, Review("c1", "flow", "ana", "mostly", 0.75, answered_at=datetime(2026, 11, 1, 9)))
    # another process reads the file while the first still holds it open: nothing waits for a close
    connection.close()
    connection = connect(path)
    record_review(
        connection, Review("c1", "flow", "ana", "fully", 1.0, "misread turn 3", answered_at=datetime(2026, 11, 2))
    )
    record_review(connection, Review("c1", "flow", "bo", "partially", 0.5, answered_at=datetime(2026, 11, 1, 10)))
    connection.close()

    connection = connect(path, read_only=True)
    assert [
        (r.reviewer, r.value) for r in _reviews(connection, "WHERE conversation_id = ? AND metric = ?", ["c1", "flow"])
    ] == [
        ("ana", "mostly"),
        ("bo", "partially"),
        ("ana", "fully"),
    ]
    current = {r.reviewer: (r.value, r.comment) for r in current_reviews(connection)}
    assert current == {"ana": ("fully", "misread turn 3"), "bo": ("partially", None)}
    labels = {(label.labeler, label.score) for label in stored_labels(connection)}
    assert labels == {("ana", 1.0), ("bo", 0.5)}
