"""Benchmark 11: flowrate beside its peers, DeepEval, promptfoo and eval_lib, each in a process
of its own against the same scripted judge, on the same conversations.

In one run, alternating: wall time over the ideal at N=1000 with 500 ms judge latency and
N=2000 with 200 ms, 50 calls at once; judge requests per conversation (counted at the judge);
the time from process start to the judge's first request; then client CPU per call at
latency 0, read from each process's rusage (so node's CPU counts for promptfoo), whole and
beyond a 100-conversation run's (start-up taken out). Each line also gives the judge's count of
requests per conversation, their mean size, and the most in flight at once (at latency 0 the
judge answers each request before it reads the next, so there it is 1 whatever the client).

Each client, one judge call per conversation where the peer allows it:
- flowrate: `flowrate eval --api-base URL -j 50` (the direct transport; its flow metric).
- DeepEval: `ConversationalGEval` with fixed evaluation steps (no call to write them), through
  `evaluate(..., AsyncConfig(max_concurrent=50))`, judge `GPTModel("gpt-4o", base_url=URL)`;
  once with its default `CacheConfig` (the test run rewritten to disk after every conversation),
  once with `CacheConfig(write_cache=False)`. Its score comes from the reply's logprobs, which
  the judge sends as OpenAI does when asked (`top_logprobs` 20).
- promptfoo: an `llm-rubric` assertion over each conversation's text (the `echo` provider
  passes the text through), grader `openai:chat:gpt-4o` with `apiBaseUrl`, `-j 50`.
- eval_lib: `ConversationalFlowRateMetric("gpt-4o")` (LiteLLM, OPENAI_BASE_URL), once through
  its own `evaluate_conversations` (one conversation at a time), once in a user's own
  `asyncio.gather` under a semaphore of 50.

The peers live in an environment of their own (nothing of theirs is committed):
    python3 -m venv /work/peers-venv && /work/peers-venv/bin/pip install deepeval eval-ai-library
    npm install --prefix /work/peers-npm promptfoo
A peer that is not installed is skipped, saying so.

python bench/peers.py [--python /work/peers-venv/bin/python]
    [--promptfoo /work/peers-npm/node_modules/.bin/promptfoo] [--rounds 1] [--only NAME,...]
    [--scale 0.02: N times this, a quick try]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import ROOT, write_conversations

J = 50
CASES = [(1000, 0.5), (2000, 0.2)]
CPU_N, CPU_SMALL_N = 2000, 100
RUN_TIMEOUT_S = 3600
DUMMY_KEY = "sk-bench-not-a-real-key"
CRITERIA = (
    "The conversation flows: each assistant turn directly addresses what the user just said, with no"
    " unnecessary clarifications, no repetition and no ignored user signals; later turns weigh more"
    " than earlier ones, and one derailing turn pulls the grade down; directness and coherence count,"
    " verbosity and politeness do not."
)
STEPS = [
    "Read the whole conversation and judge its flow as a whole, not as an average of turns.",
    "Check that each assistant turn directly addresses what the user just said.",
    "Penalise unnecessary clarifications, repetition and ignored user signals.",
    "Weight later turns more than earlier ones; one turn that derails the rest pulls the score down.",
    "Do not reward verbosity or politeness; reward directness and coherence.",
]

# -- the judge: flowrate's scripted judge, answering every peer validly --------------------------

# What each peer's parser reads from a reply that comes without a response_format
# (found in their source): the first marker found in the prompt chooses the reply.
PEER_REPLIES = [
    # promptfoo's llm-rubric grading prompt (DEFAULT_GRADING_PROMPT): {reason, pass, score}
    (
        "You are grading output according to a user-specified rubric",
        {"reason": "It flows.", "pass": True, "score": 1.0},
    ),
    # DeepEval's ConversationalGEval generate_evaluation_results: {score 0-10, reason}
    ('the exact keys `"score"` and `"reason"`', {"reason": "Each turn follows the steps.", "score": 9}),
    # eval_lib's ConversationalFlowRateMetric: {verdict, key_issues, reason}
    ("CONVERSATIONAL FLOW", {"verdict": "fully", "key_issues": [], "reason": "Each turn advances the task."}),
]
ANY_REPLY = {"reason": "scripted", "score": 1, "pass": True, "verdict": "fully", "key_issues": [], "steps": STEPS}


def schema_instance(schema: dict, defs: dict | None = None, name: str = ""):
    """A value that satisfies the JSON schema `schema` (objects, arrays, enums, refs, unions)."""
    defs = {**(defs or {}), **schema.get("$defs", {}), **schema.get("definitions", {})}
    if "$ref" in schema:
        return schema_instance(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, name)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            options = [option for option in schema[key] if option.get("type") != "null"] or schema[key]
            return schema_instance(options[0], defs, name)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        return {key: schema_instance(value, defs, key) for key, value in schema.get("properties", {}).items()}
    if kind == "array":
        count = max(int(schema.get("minItems", 1)), 1)
        return [schema_instance(schema.get("items", {"type": "string"}), defs, name) for _ in range(count)]
    if kind in ("integer", "number"):
        value = schema.get("maximum", schema.get("minimum", 1))
        return int(value) if kind == "integer" else float(value)
    return {"string": f"scripted {name}", "boolean": True, "null": None}[kind]


def peer_content(body: dict, prompt: str) -> str | None:
    """The reply's text for a request flowrate did not send (None: flowrate's own, as scripted)."""
    response_format = body.get("response_format") or {}
    described = response_format.get("json_schema") or {}
    if described.get("name") == "conversational_flow_rate":
        return None
    if "schema" in described:
        return json.dumps(schema_instance(described["schema"]))
    for marker, reply in PEER_REPLIES:
        if marker in prompt:
            return json.dumps(reply)
    return json.dumps(ANY_REPLY)


def token_logprobs(content: str, top: int) -> dict:
    """OpenAI's `logprobs` for `content`, as a request with `logprobs: true` gets them: each
    token certain, with `top` alternatives (digits, so a score token's are scores)."""

    def entry(token: str, logprob: float) -> dict:
        return {"token": token, "logprob": logprob, "bytes": list(token.encode())}

    tokens = re.findall(r"\w+|\s+|[^\w\s]", content)
    alternatives = [str(digit) for digit in range(10)] * 3
    return {
        "content": [
            {
                **entry(token, -0.0001),
                "top_logprobs": [entry(token, -0.0001)]
                + [entry(alt, -12.0 - n) for n, alt in enumerate(a for a in alternatives if a != token)][: top - 1],
            }
            for token in tokens
        ],
        "refusal": None,
    }


def serve_judge(latency_s: float) -> None:
    """The scripted judge in this process: prints its port; each line "stats" on stdin is
    answered with a JSON line (requests, their bytes, the first arrival on the monotonic clock,
    the most in flight, statuses) and starts the count afresh."""
    from tests.judge_server import JudgeServer, _completion

    def reply(body, step, prompt, n_ctx=None):
        content = peer_content(body, prompt)
        if content is None:
            return _completion(body, step, prompt, n_ctx)
        answer = _completion(body, {"content": content}, prompt, n_ctx)
        if body.get("logprobs"):
            for choice in answer["choices"]:
                choice["logprobs"] = token_logprobs(choice["message"]["content"], int(body.get("top_logprobs") or 1))
        return answer

    class PeerJudge(JudgeServer):
        request_bytes = 0

        async def _handle(self, request):
            raw = await request.read()
            with self._lock:
                self.request_bytes += len(raw)
            return await self._serve(request, json.loads(raw), reply)

    judge = PeerJudge(latency_s=latency_s, keep_bodies=False).start()
    print(judge.port, flush=True)
    for line in sys.stdin:
        if line.strip() != "stats":
            continue
        with judge._lock:
            arrivals = [moment for moment, _ in judge.arrivals]
            stats = {
                "requests": judge.requests,
                "request_bytes": judge.request_bytes,
                "first": min(arrivals, default=None),
                "max_in_flight": judge.max_in_flight,
                "not_200": sum(status != 200 for status in judge.statuses),
            }
            judge.requests = judge.max_in_flight = judge.request_bytes = 0
            judge.arrivals.clear()
            judge.statuses.clear()
        print(json.dumps(stats), flush=True)


class Judge:
    """The judge above in a process of its own (this script with --serve-judge)."""

    def __init__(self, latency_s: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve-judge", str(latency_s)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.base_url = f"http://127.0.0.1:{int(self.process.stdout.readline())}/v1"
        self.lock = threading.Lock()

    def take_stats(self) -> dict:
        with self.lock:
            self.process.stdin.write("stats\n")
            self.process.stdin.flush()
            return json.loads(self.process.stdout.readline())

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


# -- the clients ---------------------------------------------------------------------------------

READ_CONVERSATIONS = """
import json, sys
path, base_url, j, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
records = [json.loads(line) for line in open(path)]
"""

DEEPEVAL = (
    READ_CONVERSATIONS
    + """
from deepeval import evaluate
from deepeval.evaluate.configs import AsyncConfig, CacheConfig, DisplayConfig
from deepeval.metrics import ConversationalGEval
from deepeval.models import GPTModel
from deepeval.test_case import ConversationalTestCase, MultiTurnParams, Turn

cases = []
for record in records:
    turns = []
    for turn in record["turns"]:
        turns += [Turn(role="user", content=turn["input"]), Turn(role="assistant", content=turn["actual_output"])]
    cases.append(ConversationalTestCase(turns=turns, name=record["id"]))
metric = ConversationalGEval(
    name="Conversational flow", evaluation_steps=STEPS, threshold=0.7,
    evaluation_params=[MultiTurnParams.ROLE, MultiTurnParams.CONTENT],
    model=GPTModel(model="gpt-4o", base_url=base_url, api_key="KEY"),
)
result = evaluate(
    cases, [metric], async_config=AsyncConfig(max_concurrent=j),
    display_config=DisplayConfig(show_indicator=False, print_results=False, inspect_after_run=False),
    cache_config=CacheConfig(write_cache=WRITE_CACHE),
)
scores = [m.score for r in result.test_results for m in (r.metrics_data or []) if m.score is not None and not m.error]
json.dump({"scored": len(scores), "mean_score": sum(scores) / max(len(scores), 1)}, open(out, "w"))
""".replace("STEPS", repr(STEPS)).replace("KEY", DUMMY_KEY)
)

EVAL_LIB_CASES = (
    READ_CONVERSATIONS
    + """
import asyncio
from eval_lib import ConversationalEvalTestCase, EvalTestCase
from eval_lib.agent_metrics import ConversationalFlowRateMetric

cases = [
    ConversationalEvalTestCase(
        name=record["id"],
        turns=[EvalTestCase(input=t["input"], actual_output=t["actual_output"]) for t in record["turns"]],
    )
    for record in records
]
metric = ConversationalFlowRateMetric(model="gpt-4o", threshold=0.7)
"""
)

EVAL_LIB_RUNNER = (
    EVAL_LIB_CASES
    + """
from eval_lib import evaluate_conversations

results = asyncio.run(evaluate_conversations(cases, [metric], verbose=False))
scores = [m.score for _, rows in results for row in rows for m in row.metrics_data if m.score is not None]
json.dump({"scored": len(scores), "mean_score": sum(scores) / max(len(scores), 1)}, open(out, "w"))
"""
)

EVAL_LIB_GATHER = (
    EVAL_LIB_CASES
    + """
async def main():
    gate = asyncio.Semaphore(j)

    async def one(case):
        async with gate:
            return await metric.evaluate(case)

    return await asyncio.gather(*(one(case) for case in cases), return_exceptions=True)

results = asyncio.run(main())
scores = [r["score"] for r in results if isinstance(r, dict) and r.get("score") is not None]
json.dump({"scored": len(scores), "mean_score": sum(scores) / max(len(scores), 1)}, open(out, "w"))
"""
)


def conversation_text(record: dict) -> str:
    return "\n".join(f"User: {turn['input']}\nAssistant: {turn['actual_output']}" for turn in record["turns"])


def peer_env(scratch: Path, base_url: str) -> dict:
    """Every client's environment: the judge as OpenAI's base URL, a dummy key, telemetry,
    update checks and remote price lists off (the network is closed here)."""
    return dict(
        os.environ,
        OPENAI_API_KEY=DUMMY_KEY,
        OPENAI_BASE_URL=base_url,
        OPENAI_API_BASE=base_url,
        OPENAI_API_BASE_URL=base_url,
        HOME=str(scratch / "home"),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        LITELLM_TELEMETRY="False",
        DEEPEVAL_TELEMETRY_OPT_OUT="1",
        DEEPEVAL_UPDATE_WARNING_OPT_IN="0",
        DEEPEVAL_NO_INSPECT_PROMPT="1",
        DEEPEVAL_GRPC_LOGGING="0",
        ERROR_REPORTING="0",
        PROMPTFOO_DISABLE_TELEMETRY="1",
        PROMPTFOO_DISABLE_UPDATE="1",
        PROMPTFOO_DISABLE_SHARING="1",
        PROMPTFOO_DISABLE_REMOTE_GENERATION="1",
        PROMPTFOO_CACHE_ENABLED="false",
        PROMPTFOO_CONFIG_DIR=str(scratch / "promptfoo"),
        FLOWRATE_CACHE_DIR=str(scratch / f"flowrate-cache-{time.monotonic_ns()}"),
        NO_COLOR="1",
        POSTHOG_DISABLED="1",
        DO_NOT_TRACK="1",
    )


class Client:
    """One client: `command(path, base_url, out)` is the process to run; `check(out)` the
    conversations it scored, read from what it wrote."""

    def __init__(self, name: str, command, check) -> None:
        self.name, self.command, self.check = name, command, check


def python_client(name: str, python: str, script: str, scratch: Path) -> Client:
    driver = scratch / f"{name.split()[0].replace(',', '')}-{abs(hash(name))}.py"
    driver.write_text(script)

    def command(path: Path, base_url: str, out: Path) -> list[str]:
        return [python, str(driver), str(path), base_url, str(J), str(out)]

    return Client(name, command, lambda out: json.loads(out.read_text())["scored"])


def flowrate_client() -> Client:
    def command(path: Path, base_url: str, out: Path) -> list[str]:
        return [sys.executable, "-m", "flowrate", "eval", str(path), "--api-base", base_url,
                "-j", str(J), "-o", str(out)]  # fmt: skip

    def check(out: Path) -> int:
        rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
        return sum(1 for row in rows if row.get("score") is not None)

    return Client("flowrate", command, check)


def promptfoo_client(promptfoo: str, scratch: Path) -> Client:
    def command(path: Path, base_url: str, out: Path) -> list[str]:
        records = [json.loads(line) for line in path.read_text().splitlines()]
        config = {
            "description": "conversational flow",
            "prompts": ["{{conversation}}"],
            "providers": ["echo"],
            "defaultTest": {
                "options": {
                    "provider": {
                        "id": "openai:chat:gpt-4o",
                        "config": {"apiBaseUrl": base_url, "apiKey": DUMMY_KEY, "temperature": 0},
                    }
                },
                "assert": [{"type": "llm-rubric", "value": CRITERIA}],
            },
            "tests": [{"vars": {"conversation": conversation_text(record)}} for record in records],
        }
        config_path = out.with_suffix(".config.json")
        config_path.write_text(json.dumps(config))
        return [promptfoo, "eval", "-c", str(config_path), "-j", str(J), "--no-cache", "--no-progress-bar",
                "--no-table", "-o", str(out)]  # fmt: skip

    def check(out: Path) -> int:
        results = json.loads(out.read_text())["results"]["results"]
        return sum(1 for row in results if (row.get("gradingResult") or {}).get("score") is not None)

    return Client("promptfoo", command, check)


def clients(options, scratch: Path) -> list[Client]:
    found = [flowrate_client()]
    python = options.python
    if Path(python).exists():
        found.append(python_client("DeepEval", python, DEEPEVAL.replace("WRITE_CACHE", "True"), scratch))
        found.append(
            python_client("DeepEval, no write_cache", python, DEEPEVAL.replace("WRITE_CACHE", "False"), scratch)
        )
    else:
        print(f"DeepEval and eval_lib skipped: no {python} (see this script's docstring to install them)")
    if Path(options.promptfoo).exists():
        found.append(promptfoo_client(options.promptfoo, scratch))
    else:
        print(f"promptfoo skipped: no {options.promptfoo}")
    if Path(python).exists():
        found.append(python_client("eval_lib, own gather", python, EVAL_LIB_GATHER, scratch))
        found.append(python_client("eval_lib, its runner", python, EVAL_LIB_RUNNER, scratch))
    for client in list(found):
        if client.name.startswith(("DeepEval", "eval_lib")):
            module = "deepeval" if client.name.startswith("DeepEval") else "eval_lib"
            probe = subprocess.run([python, "-c", f"import importlib.util as u; print(u.find_spec('{module}'))"],
                                   capture_output=True, text=True)  # fmt: skip
            if probe.stdout.strip() in ("", "None"):
                print(f"{client.name} skipped: {module} is not installed in {python}")
                found.remove(client)
    if options.only:
        wanted = [name.strip().lower() for name in options.only.split(",")]
        found = [client for client in found if any(client.name.lower().startswith(name) for name in wanted)]
    return found


def run(client: Client, judge: Judge, path: Path, n: int, scratch: Path) -> dict:
    """One run of `client` over `path`: its wall time from process start to exit and from the
    judge's first request to exit, its process CPU (rusage, its children included), what the
    judge counted."""
    judge.take_stats()  # start the count afresh
    out = scratch / f"out-{time.monotonic_ns()}.json"
    log = (scratch / "client.log").open("w")
    started = time.monotonic()
    process = subprocess.Popen(
        client.command(path, judge.base_url, out),
        cwd=scratch,
        env=peer_env(scratch, judge.base_url),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    timer = threading.Timer(RUN_TIMEOUT_S, process.kill)
    timer.start()
    _, status, usage = os.wait4(process.pid, 0)
    ended = time.monotonic()
    timer.cancel()
    process.returncode = os.waitstatus_to_exitcode(status)
    log.close()
    stats = judge.take_stats()
    try:
        scored = client.check(out)
    except Exception as problem:  # what it wrote, if anything, is not what it should have
        scored = f"no results ({type(problem).__name__}); exit {process.returncode}"
        tail = (scratch / "client.log").read_text()[-1500:]
        print(f"    {client.name} failed, its output ends:\n{tail}", flush=True)
    first = stats["first"]
    return {
        "process_s": ended - started,
        "from_first_s": ended - first if first else float("nan"),
        "first_request_s": first - started if first else float("nan"),
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "requests": stats["requests"],
        "request_kb": stats["request_bytes"] / max(stats["requests"], 1) / 1000,
        "not_200": stats["not_200"],
        "max_in_flight": stats["max_in_flight"],
        "scored": scored,
        "exit": process.returncode,
        "n": n,
    }


def describe(result: dict) -> str:
    scored = result["scored"]
    ok = (
        ""
        if scored == result["n"]
        else f", {scored}"
        if isinstance(scored, str)
        else f", scored {scored} of {result['n']}"
    )
    errors = f", {result['not_200']} non-200" if result["not_200"] else ""
    return (
        f"{result['requests'] / result['n']:.2f} calls/conv of {result['request_kb']:.1f} KB,"
        f" at most {result['max_in_flight']} in flight{errors}{ok}"
    )


def wall(options, found: list[Client], scratch: Path) -> dict:
    firsts: dict[str, list[float]] = {client.name: [] for client in found}
    for n, latency in CASES:
        n = max(int(n * options.scale), J)
        ideal = math.ceil(n / J) * latency
        path = write_conversations(scratch / f"w{n}.jsonl", n)
        taken: dict[str, list[dict]] = {client.name: [] for client in found}
        judge = Judge(latency)
        try:
            for _ in range(options.rounds):
                for client in found:
                    result = run(client, judge, path, n, scratch)
                    taken[client.name].append(result)
                    firsts[client.name].append(result["first_request_s"])
                    print(f"    ({client.name}: {result['from_first_s']:.2f} s)", flush=True)
        finally:
            judge.close()
        print(f"N={n} latency={latency}s j={J} ideal={ideal:.1f}s, best of {options.rounds} alternating round(s);"
              " wall from the judge's first request to the process's exit (process start to exit)")  # fmt: skip
        for name, results in taken.items():
            best = min(results, key=lambda result: result["from_first_s"])
            print(f"  {name:26} {best['from_first_s']:7.2f} s  {best['from_first_s'] / ideal:6.2f} x ideal"
                  f"  ({best['process_s']:.2f} s: {best['process_s'] / ideal:.2f} x)  {describe(best)}")  # fmt: skip
    return firsts


def cpu(options, found: list[Client], scratch: Path) -> None:
    n, small = max(int(CPU_N * options.scale), J), max(int(CPU_SMALL_N * options.scale), 10)
    path, small_path = write_conversations(scratch / "cpu.jsonl", n), write_conversations(scratch / "s.jsonl", small)
    spent: dict[str, list[dict]] = {client.name: [] for client in found}
    judge = Judge(0.0)
    try:
        for _ in range(options.rounds):
            for client in found:
                spent[client.name].append(
                    (run(client, judge, path, n, scratch), run(client, judge, small_path, small, scratch))
                )
    finally:
        judge.close()
    print(f"client CPU per call, process rusage, N={n} j={J} latency 0, lowest of {options.rounds} alternating"
          f" round(s); beyond start-up: (CPU at {n} - CPU at {small}) / {n - small}")  # fmt: skip
    for name, pairs in spent.items():
        whole = min(big["cpu_s"] for big, _ in pairs)
        beyond = min((big["cpu_s"] - little["cpu_s"]) / (n - small) for big, little in pairs)
        big = min((big for big, _ in pairs), key=lambda result: result["cpu_s"])
        print(f"  {name:26} {whole / n * 1000:6.2f} ms whole ({whole:.2f} s), {beyond * 1000:6.2f} ms beyond start-up;"
              f"  {describe(big)}")  # fmt: skip


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--serve-judge":
        serve_judge(float(sys.argv[2]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--python", default="/work/peers-venv/bin/python", help="the peers' Python (DeepEval, eval_lib)"
    )
    parser.add_argument("--promptfoo", default="/work/peers-npm/node_modules/.bin/promptfoo")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--only", default="", help="comma-separated client names (prefixes) to run")
    parser.add_argument("--scale", type=float, default=1.0, help="N times this (a quick try: 0.05)")
    options = parser.parse_args()
    load = os.getloadavg()[0]
    print(
        f"load average at start {load:.2f} on {os.cpu_count()} cores"
        + (" (not alone on the machine)" if load > 0.5 else "")
    )
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        (scratch / "home").mkdir()
        found = clients(options, scratch)
        print("clients:", ", ".join(client.name for client in found), flush=True)
        firsts = wall(options, found, scratch)
        print("time from process start to the judge's first request, best of the runs above")
        for name, times in firsts.items():
            print(f"  {name:26} {min(times):6.2f} s")
        cpu(options, found, scratch)
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
