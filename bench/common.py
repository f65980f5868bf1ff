"""Shared by the benchmark scripts: the scripted judge in a process of its own, inputs, a bare LiteLLM loop."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_API_KEY", "sk-bench-not-a-real-key")

TOPICS = ["a late parcel", "a double charge", "a password reset", "a cancelled flight", "a broken router", "a refund"]


@contextmanager
def judge_process(latency: float = 0.0, faults: str = ""):
    """The scripted judge on 127.0.0.1, in its own process; yields its base URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.judge_server", "--latency", str(latency), "--faults", faults],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(process.stdout.readline())
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.kill()
        process.wait()


DEFAULT_DATA = ROOT.parent / "shared" / "data" / "dialogue-ratings"
REALISTIC_FILES = ("uss_sgd.jsonl", "uss_mwoz.jsonl")  # 1,000 task-oriented sessions each, 3.9 and 4.2 KB a line


def add_data_argument(parser) -> None:
    """`--data DIR`: the human-rated dialogues (`../shared/data/dialogue-ratings` beside the repository)."""
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help=f"the dialogue-ratings directory holding {' and '.join(REALISTIC_FILES)} (default: {DEFAULT_DATA})",
    )


def write_realistic(path: Path, count: int, data: Path) -> Path:
    """`count` distinct real dialogues from `data`, whole lines (their labels and extras kept, as
    a user's export would have them): USS-SGD's 1,000, then USS-MultiWOZ's 1,000; past 2,000 they
    repeat, each repeat's first message numbered, so that no two prompts are alike (a repeated
    prompt would be answered by the response cache, and flowrate would send fewer calls)."""
    lines = []
    for name in REALISTIC_FILES:
        source = data / name
        if not source.is_file():
            raise SystemExit(
                f"{source}: not found; the realistic benchmarks read the USS dialogues ({', '.join(REALISTIC_FILES)})"
                " from the dialogue-ratings directory: give it with --data DIR"
            )
        lines += [line for line in source.read_bytes().splitlines() if line.strip()]
    with path.open("wb") as handle:
        for n in range(count):
            record = json.loads(lines[n % len(lines)])
            repeat = n // len(lines)
            if repeat:
                record["id"] = f"{record['id']}-{repeat}"
                record["turns"][0]["input"] = f"({repeat}) {record['turns'][0]['input']}"
            handle.write(json.dumps(record).encode() + b"\n")
    return path


def write_conversations(path: Path, count: int) -> Path:
    """`count` distinct support conversations of three to six turns."""
    with path.open("w") as handle:
        for n in range(count):
            topic = TOPICS[n % len(TOPICS)]
            turns = [
                {
                    "input": f"Hi, I need help with {topic}, case {n}.",
                    "actual_output": f"Sorry about {topic}. Could you give me the reference for case {n}?",
                },
                {
                    "input": f"It is REF-{n:06d}.",
                    "actual_output": f"Thanks, I found REF-{n:06d}. I am looking into it now.",
                },
                {
                    "input": "How long will it take?",
                    "actual_output": "It should be sorted within two business days; you will get an email.",
                },
            ][: 3 + n % 2] + [{"input": "Thanks!", "actual_output": "You're welcome, have a good day."}] * (n % 3)
            handle.write(json.dumps({"id": f"bench-{n}", "turns": turns}) + "\n")
    return path


async def bare_litellm_loop(messages_per_conversation: list[list[dict]], base_url: str, concurrency: int) -> float:
    """One `acompletion` per conversation under a semaphore: the floor flowrate is compared with.

    Same judge, same settings: the model string, response format, temperature, reply limit
    (max_tokens), timeout and retries flowrate sends for `--model gpt-4o --api-base URL`.
    """
    import litellm

    from flowrate.judge.address import JudgeAddress
    from flowrate.judge.litellm_backend import LiteLLMBackend
    from flowrate.metrics.rubric_metric import RubricMetric
    from flowrate.rubric.model import load_rubric
    from flowrate.scores.schema import reply_schema

    litellm.suppress_debug_info = True
    backend = LiteLLMBackend(JudgeAddress.parse("gpt-4o", base_url))
    response_format = backend.structured_output("conversational_flow_rate", reply_schema(load_rubric()))
    max_tokens = RubricMetric(None, model="gpt-4o", api_base=base_url).budget.reply_token_limit
    semaphore = asyncio.Semaphore(concurrency)

    async def one(messages):
        async with semaphore:
            response = await litellm.acompletion(
                model=backend.litellm_model,
                messages=messages,
                api_base=base_url,
                temperature=0,
                num_retries=0,
                max_retries=0,
                timeout=60,
                response_format=response_format,
                max_tokens=max_tokens,
            )
            return response.choices[0].message.content

    started = time.perf_counter()
    await asyncio.gather(*(one(messages) for messages in messages_per_conversation))
    return time.perf_counter() - started


async def raw_aiohttp_loop(messages_per_conversation: list[list[dict]], base_url: str, concurrency: int) -> float:
    """One POST per conversation over one aiohttp session under a semaphore: the floor the direct
    transport is compared with. The same body flowrate sends for `--model gpt-4o --api-base URL`
    (schema, temperature, reply limit); the reply is parsed as JSON and its text taken, nothing more."""
    import aiohttp
    import orjson

    from flowrate.judge.address import JudgeAddress
    from flowrate.judge.litellm_backend import LiteLLMBackend
    from flowrate.metrics.rubric_metric import RubricMetric
    from flowrate.rubric.model import load_rubric
    from flowrate.scores.schema import reply_schema

    response_format = LiteLLMBackend(JudgeAddress.parse("gpt-4o", base_url)).structured_output(
        "conversational_flow_rate", reply_schema(load_rubric())
    )
    max_tokens = RubricMetric(None, model="gpt-4o", api_base=base_url).budget.reply_token_limit
    semaphore = asyncio.Semaphore(concurrency)
    headers = {"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}", "Content-Type": "application/json"}

    async def one(client, messages):
        body = {"model": "gpt-4o", "messages": messages, "temperature": 0, "max_tokens": max_tokens,
                "response_format": response_format}  # fmt: skip
        async with (
            semaphore,
            client.post(f"{base_url}/chat/completions", data=orjson.dumps(body), headers=headers) as answer,
        ):
            return orjson.loads(await answer.read())["choices"][0]["message"]["content"]

    started = time.perf_counter()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as client:
        await asyncio.gather(*(one(client, messages) for messages in messages_per_conversation))
    return time.perf_counter() - started


def request_bodies(messages_per_conversation: list[list[dict]], path: Path) -> Path:
    """The bodies `raw_aiohttp_loop` sends, one a line, for a raw loop in a process of its own."""
    import orjson

    from flowrate.judge.address import JudgeAddress
    from flowrate.judge.litellm_backend import LiteLLMBackend
    from flowrate.metrics.rubric_metric import RubricMetric
    from flowrate.rubric.model import load_rubric
    from flowrate.scores.schema import reply_schema

    base_url = "http://127.0.0.1:9/v1"  # only to make the backend: no call is made
    response_format = LiteLLMBackend(JudgeAddress.parse("gpt-4o", base_url)).structured_output(
        "conversational_flow_rate", reply_schema(load_rubric())
    )
    max_tokens = RubricMetric(None, model="gpt-4o", api_base=base_url).budget.reply_token_limit
    with path.open("wb") as handle:
        for messages in messages_per_conversation:
            body = {"model": "gpt-4o", "messages": messages, "temperature": 0, "max_tokens": max_tokens,
                    "response_format": response_format}  # fmt: skip
            handle.write(orjson.dumps(body) + b"\n")
    return path


def rendered_messages(path: Path) -> list[list[dict]]:
    """The exact prompts flowrate sends for the conversations in `path`."""
    from flowrate.inputs.files import InputSet, iter_cases
    from flowrate.rubric.model import load_rubric

    rubric = load_rubric()
    inputs = InputSet([str(path)])
    try:
        return [rubric.build_messages(record.case) for record in iter_cases(inputs)]
    finally:
        inputs.close()


async def flowrate_run(
    path: Path, base_url: str, concurrency: int, cache_dir: Path, output: Path, transport: str = "litellm"
):
    """flowrate's online path, as `flowrate eval` runs it, minus the process start, through
    `transport` ("litellm", the figures before the direct transport; "auto": the direct one)."""
    from flowrate.evaluation.engines import engine_for
    from flowrate.evaluation.file_run import FileRun
    from flowrate.results.files import ResultsFile
    from flowrate.settings.options import EvalSettings

    settings = EvalSettings(
        api_base=base_url,
        concurrency=concurrency,
        cache_dir=str(cache_dir),
        output=str(output),
        model="gpt-4o",
        transport=transport,
    )
    started = time.perf_counter()
    run = FileRun([str(path)], settings)
    results = ResultsFile(run.settings.output, append=False)
    try:
        summary = await engine_for(settings)(run, results)
    finally:
        results.close()
    return time.perf_counter() - started, summary
