"""The scheduler in process, with an in-process judge (`ScriptedClient`, a `CustomLLMClient`): no
HTTP, so these specify the engine alone; the scripted HTTP judge covers everything across LiteLLM."""

import asyncio

from flowrate.metrics.rubric_metric import RubricMetric
from flowrate.results.events import KeepRows, OutputStopped, RunListener
from tests.helpers import NO_WAIT, ScriptedClient, conversation, verdict


def cases(count):
    return [(conversation(f"question {n}", f"answer {n}", id=f"c{n}"), None) for n in range(count)]


class SlowClient(ScriptedClient):
    """Answers after a short wait, counting the calls in flight."""

    def __init__(self, *replies):
        super().__init__(*replies)
        self.in_flight = self.most_in_flight = 0

    async def chat_complete(self, messages, temperature):
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0.01)
        self.in_flight -= 1
        return await super().chat_complete(messages, temperature)


def scheduler(client, listener, **options):
    from flowrate.evaluation.engine import Scheduler

    metric = RubricMetric(None, model=client, retry=NO_WAIT)
    return Scheduler(metrics=[metric], listener=listener, **options)


async def test_every_conversation_is_told_once_and_no_more_than_concurrency_are_judged_at_once():
    client, kept = SlowClient(verdict("fully")), KeepRows()
    summary = await scheduler(client, kept, concurrency=3).run(cases(20))
    assert sorted(row.id for row in kept.rows) == sorted(f"c{n}" for n in range(20))
    assert summary.judged == 20 and client.most_in_flight <= 3 and len(client.calls) == 20


async def test_rows_the_output_held_are_counted_and_told_as_resumed_not_judged_again():
    client, kept = ScriptedClient(verdict("fully")), KeepRows()
    first = KeepRows()
    await scheduler(client, first).run(cases(2))
    done = {(row.id, row.metric): row for row in first.rows}
    client.calls.clear()
    summary = await scheduler(client, kept, done=done).run(cases(4))
    assert summary.resumed == 2 and len(client.calls) == 2 and summary.judged == 4


class FullDisk(RunListener):
    def __init__(self, after):
        self.after, self.rows = after, 0

    def row(self, row):
        if self.rows >= self.after:
            raise OutputStopped("out.jsonl: No space left on device")
        self.rows += 1


async def test_a_listener_that_can_take_no_more_stops_the_run():
    client = ScriptedClient(verdict("fully"))
    summary = await scheduler(client, FullDisk(after=3), concurrency=1).run(cases(50))
    assert summary.output_error == "out.jsonl: No space left on device"
    assert len(client.calls) < 50  # it stopped scheduling
