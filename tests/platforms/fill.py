"""Traces made by the platforms' own instrumentation, run with the `platforms` extra's Python (its
own environment: see tests/platforms/conftest.py): the real `openai` client talks to the scripted
judge on 127.0.0.1 as a chat application would, and

- `phoenix`: Phoenix's `phoenix.otel.register` with OpenInference's OpenAI instrumentor sends the
  spans to `phoenix serve` over OTLP/HTTP, each session's turns under `using_session`;
- `mlflow`: `mlflow.openai.autolog()` records each turn as a trace of the experiment, the
  session in the trace's metadata `mlflow.trace.session` (`mlflow.update_current_trace`).

Usage: python fill.py phoenix|mlflow URL PLACE JUDGE_URL SESSIONS_FILE, where the JSON file maps
a session id to its user turns; each turn is one call of the chat (the whole history sent). For
MLflow, PLACE is the experiment's name: it is made when it does not exist, and its id printed."""

import json
import sys

SYSTEM = "You are Harbor Bank's assistant."


def chat_turns(client, turns, each_turn):
    """Each user turn sent with the history so far, inside `each_turn()`'s context; a turn given
    as [user, reply] is history the application had already (a session resumed), not sent."""
    messages = [{"role": "system", "content": SYSTEM}]
    for turn in turns:
        if isinstance(turn, list):
            messages += [{"role": "user", "content": turn[0]}, {"role": "assistant", "content": turn[1]}]
            continue
        messages.append({"role": "user", "content": turn})
        with each_turn():
            reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages).choices[0].message
        messages.append({"role": "assistant", "content": reply.content})


def phoenix(url, project, client, sessions):
    from openinference.instrumentation import using_session
    from openinference.instrumentation.openai import OpenAIInstrumentor
    from phoenix.otel import register

    provider = register(endpoint=f"{url}/v1/traces", project_name=project, batch=False, verbose=False)
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    for session, turns in sessions.items():
        chat_turns(client, turns, lambda session=session: using_session(session))
    provider.force_flush()
    provider.shutdown()


def mlflow_traces(url, experiment, client, sessions):
    import contextlib
    import os

    # each trace logged before the next turn: MLflow's async queue lost a fifth of 1,200 traces
    # under load (bench/platforms.py's fill), which would leave the stand-in short of sessions
    os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"
    import mlflow

    mlflow.set_tracking_uri(url)
    print(mlflow.set_experiment(experiment).experiment_id)
    mlflow.openai.autolog()

    for session, turns in sessions.items():

        @contextlib.contextmanager
        def turn(session=session):
            with mlflow.start_span(name="chat_turn"):
                mlflow.update_current_trace(metadata={"mlflow.trace.session": session})
                yield

        chat_turns(client, turns, turn)
    mlflow.flush_trace_async_logging()


def main():
    import openai

    platform, url, place, judge_url, sessions = sys.argv[1:6]
    client = openai.OpenAI(base_url=judge_url, api_key="sk-test", max_retries=0)
    made = {"phoenix": phoenix, "mlflow": mlflow_traces}[platform]
    with open(sessions, encoding="utf-8") as given:
        made(url, place, client, json.load(given))


if __name__ == "__main__":
    main()
