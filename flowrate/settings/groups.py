"""Every option, declared once, in the group of its concern: its name (the config key, and
`--name-with-dashes` on the command line), type, default, help, and its `Flag` (other flags,
the environment variable FLOWRATE_NAME). `flowrate.cli.options` makes the commands' parameters
from these declarations; a field without a `Flag` is set in the config file only.

`EvalSettings` (in `options`) is all the groups together."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, cast

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from flowrate.errors import ConfigError


@dataclass(frozen=True)
class Flag:
    """How a field is given on the command line.

    `names`: the flags, the long one first [default: `--` and the field's name with dashes];
    `parse`: turns what the command line gave (a list for `list[str]` in `cli_type`) into the
    field's value; `cli_type`: what typer parses, when not the field's own type."""

    names: tuple[str, ...] = ()
    parse: Callable[[Any], Any] | None = None
    cli_type: Any = None

    def flags(self, field: str) -> tuple[str, ...]:
        """The flags of `field`: the long one first."""
        long = "--" + field.replace("_", "-")
        if not self.names or not self.names[0].startswith("--"):
            return (long, *self.names)
        return self.names

    def parameter(self, field: str) -> str:
        """The command's parameter name (and, in capitals after FLOWRATE_, the variable)."""
        return self.flags(field)[0].removeprefix("--").replace("-", "_")

    def env(self, field: str) -> str:
        """The environment variable of `field`."""
        return "FLOWRATE_" + self.parameter(field).upper()


def flag(*names: str, parse: Callable[[Any], Any] | None = None, cli_type: Any = None) -> Flag:
    """A field's `Flag`: `names` (such as "-m"), see `Flag`."""
    return Flag(names, parse, cli_type)


def _no_credentials_in_url(value: str | None) -> str | None:
    """`--api-base` is an http(s) URL without `user:password@`: credentials there would be kept
    in logs and state files, and LiteLLM's client would not send them."""
    if value is None:
        return value
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
    except ValueError:
        raise ValueError("is not a URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL, such as http://127.0.0.1:8000/v1")
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            "holds credentials (user:password@); they would be kept in logs and state files."
            " Give the key in OPENAI_API_KEY (sent as a bearer token) and the URL without them"
        )
    return value


def weight_pairs(pairs: list[str]) -> dict[str, float]:
    """`--weight NAME=W` pairs as `weights`."""
    weights = {}
    for pair in pairs:
        name, _, number = pair.partition("=")
        try:
            if not name:
                raise ValueError(pair)
            weights[name] = float(number)
        except ValueError:
            raise ConfigError(f"option weight: {pair!r} must be NAME=W, W a number") from None
    return weights


def cache_folder(cache_dir: str | None) -> Path:
    """The response cache's folder: `cache_dir` with `~` expanded, or the user cache directory."""
    if cache_dir:
        return Path(cache_dir).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("flowrate"))


G = TypeVar("G", bound="Group")


class Group(BaseModel):
    """A group of options. Its validators are built when it first validates, not on import:
    `flowrate --help` reads only the declarations."""

    model_config = ConfigDict(defer_build=True)

    @classmethod
    def of(cls: type[G], settings: BaseModel) -> G:
        """This group's options as `settings` (which holds this group's fields, and others) has them."""
        # pydantic's mypy plugin types model_construct as returning the class it is declared on
        return cast(G, cls.model_construct(**{name: getattr(settings, name) for name in cls.model_fields}))


class ModelPrice(BaseModel):
    """A model's price from the config, in USD per million tokens: `input`, `output`, and the
    input read from the provider's prompt cache (`cached_input`) and written to it
    (`cache_write`), each the input's price when not given."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(None, ge=0)
    cache_write: float | None = Field(None, ge=0)


ReasoningEffort = Literal["none", "minimal", "low", "medium", "high"]
# "low" for judging: a verdict on a rubric needs little reasoning, and on the stand-in (which
# charges reasoning tokens by effort as docs/judges.md says) each step up costs four times the
# reasoning tokens, billed as output; "minimal" is gpt-5's only (the o-series get "low"). An
# effort below the provider's default never turns thinking on: Claude thinks at medium and high
# only. "none" sends no effort (the provider's default).
DEFAULT_REASONING_EFFORT: ReasoningEffort = "low"


class JudgeOptions(Group):
    """Which judge: the model and the server it is called at."""

    model: Annotated[str, flag("-m")] = Field(
        "gpt-4o",
        description="Judge model: gpt-4o, anthropic:claude-3-5-sonnet-latest, ollama:llama3, or any LiteLLM"
        " provider/model.",
    )
    api_base: Annotated[str | None, AfterValidator(_no_credentials_in_url), flag()] = Field(
        None, description="Base URL of an OpenAI-compatible server (vLLM, llama.cpp, LM Studio, a gateway)."
    )
    transport: Annotated[Literal["auto", "direct", "litellm"], flag()] = Field(
        "auto",
        description="How a judge speaking OpenAI's protocol (OpenAI, Azure, any --api-base) is called: auto and"
        " direct over flowrate's own HTTP client, litellm through LiteLLM; other providers always go through"
        " LiteLLM. [default: auto]",
    )
    reasoning_effort: Annotated[ReasoningEffort, flag()] = Field(
        DEFAULT_REASONING_EFFORT,
        description="How hard a judge that reasons thinks before its verdict: OpenAI's reasoning models"
        " (reasoning_effort), Gemini's and Claude's thinking budgets; none sends none (the provider's default)."
        " [default: low]",
    )
    prices: dict[str, ModelPrice] = Field(
        {},
        description="Per model as --model names it, its price in USD per million tokens where LiteLLM's map has"
        " none (an Azure deployment, a fine-tune): input, cached_input, cache_write and output.",
    )


# Seconds one attempt may take when --timeout is not given. A hosted API answers a judge call in
# seconds; a self-hosted model on CPUs may not: a cold 2,700-token prompt on 2 CPU cores
# (Qwen2.5-Coder-1.5B, llama-cpp-python) took over 60 s before its first token (issue 14).
HOSTED_TIMEOUT_S = 60.0
SELF_HOSTED_TIMEOUT_S = 600.0


class RetryOptions(Group):
    """How each judge call is tried: its time, its retries and the waits between them."""

    max_retries: Annotated[int, flag()] = Field(
        5, ge=0, description="Retries of a call after a rate limit, 5xx, timeout or dropped connection."
    )
    timeout: Annotated[float | None, flag()] = Field(  # None: by the judge's kind, as described
        None,
        gt=0,
        description=f"Seconds one attempt may take. [default: {HOSTED_TIMEOUT_S:g}; {SELF_HOSTED_TIMEOUT_S:g} for a"
        " self-hosted model, so a cold CPU server finishes]",
    )
    backoff: Annotated[float, flag()] = Field(
        1.0, ge=0, description="First retry wait in seconds, doubled each retry, with jitter."
    )
    backoff_max: Annotated[float, flag()] = Field(
        60.0, ge=0, description="Longest wait between retries, Retry-After included."
    )


class LimitOptions(Group):
    """How hard the judge is driven: calls in flight, rate ceilings, the budget in USD."""

    concurrency: Annotated[int, flag("-j")] = Field(16, ge=1, description="Judge calls in flight at most.")
    rpm: Annotated[float | None, flag()] = Field(None, gt=0, description="Requests per minute at most.")
    tpm: Annotated[float | None, flag()] = Field(
        None, gt=0, description="Tokens per minute at most, over any 60 seconds; estimated before each call."
    )
    max_cost: Annotated[float | None, flag()] = Field(
        None, ge=0, description="Budget in USD: stop scheduling calls before it would be passed; the rest is skipped."
    )


class CacheOptions(Group):
    """The response cache."""

    cache_dir: Annotated[str | None, flag()] = Field(
        None, description="Where the response cache lives. [default: the user cache directory]"
    )
    no_cache: Annotated[bool, flag()] = Field(False, description="Neither read nor write the response cache.")


class PromptOptions(Group):
    """What the judge is asked and how: the rubric, the language, the conversation's cut."""

    rubric: Annotated[str | None, flag()] = Field(
        None, description="A rubric file of your own (see configs/rubric.example.yaml)."
    )
    language: Annotated[str, flag()] = Field("English", description="Language of reasons and key issues.")
    cut_logs: Annotated[bool, flag()] = Field(
        False,
        description="The logs were cut after their last message: a final user message nobody answered is left"
        ' out, not judged as a user left hanging (a record\'s "log_cut" says so for itself).',
    )
    samples: Annotated[int, flag()] = Field(
        1, ge=1, le=20, description="Verdicts per conversation; the row carries the majority and the agreement."
    )
    logprobs: Annotated[bool, flag()] = Field(
        False,
        description="Ask the judge for its tokens' log-probabilities: each row gets level_probs, the judge's"
        " distribution over the scale, and expected_score, where the judge gives them (OpenAI, vLLM, llama-server,"
        " llama-cpp-python's server unless started with logits_all off, gguf:). --score expected or combined and"
        " the mark of uncertain rows ask for them too.",
    )
    reply_order: Annotated[Literal["reason-first", "verdict-first"], flag()] = Field(
        "reason-first",
        description="The order of the reply's fields: the reason and key issues before the verdict, or the"
        " verdict first (its distribution is then the judge's first look, before any reasoning).",
    )
    max_input_tokens: Annotated[int | None, flag()] = Field(
        None,
        ge=256,
        description="The judge's context budget; longer conversations lose their middle turns. [default: the"
        " model's known window]",
    )


Score = Literal["verdict", "expected", "combined", "checklist", "fitted"]  # what `--score` may name


@dataclass(frozen=True)
class ScoreChoice:
    """What a row is scored by, and what the judge is asked for it: `score` (`--score`), the
    reply's field order `reply_order`, the mark `uncertain_below`, `logprobs` asked for, and how
    hard a judge that reasons thinks before its verdict (`reasoning_effort`), and whether each turn is
    asked whether it breaks the flow (`turn_look`)."""

    score: str = "verdict"
    reply_order: str = "reason-first"
    uncertain_below: float | None = None
    logprobs: bool = False
    reasoning_effort: str = DEFAULT_REASONING_EFFORT
    turn_look: bool = False

    @property
    def asks_logprobs(self) -> bool:
        """Whether the judge is asked for log-probabilities: `logprobs`, or a score, a mark or a look that needs them."""
        return self.logprobs or self.score != "verdict" or self.uncertain_below is not None or self.turn_look

    @property
    def looks_first(self) -> bool:
        """Whether a verdict-first look is asked besides the reply (a verdict-first reply is its own)."""
        return self.score in ("combined", "fitted") and self.reply_order == "reason-first"

    @property
    def asks_checklist(self) -> bool:
        """Whether the rubric's checklist is asked besides the reply (`--score checklist` or `fitted`)."""
        return self.score in ("checklist", "fitted")


THRESHOLDS = (0.0, 1.0)  # where a threshold may lie: scores are fractions


def check_threshold(threshold: float, of: str = "the threshold") -> float:
    """`threshold` when it lies in `THRESHOLDS`; else ValueError naming it as `of`."""
    if not THRESHOLDS[0] <= threshold <= THRESHOLDS[1]:
        raise ValueError(f"{of} must lie in [{THRESHOLDS[0]:g}, {THRESHOLDS[1]:g}]")
    return threshold


class MetricOptions(Group):
    """The metrics graded, their weights and where a pass begins."""

    metric: Annotated[list[str], flag()] = Field(
        ["conversational_flow_rate"],
        description="A metric to grade with; repeat for several (see `flowrate metrics`). [default:"
        " conversational_flow_rate]",
    )
    weights: Annotated[dict[str, float], flag("--weight", parse=weight_pairs, cli_type=list[str])] = Field(
        {}, description="NAME=W: a criterion's weight in user_satisfaction; repeatable. [default: 1 each]"
    )
    threshold: Annotated[float, flag()] = Field(
        0.7, ge=THRESHOLDS[0], le=THRESHOLDS[1], description="A conversation passes when its score is at least this."
    )
    thresholds: dict[str, float] = Field({}, description="Per metric, a threshold of its own.")
    score: Annotated[Score, flag()] = Field(
        "verdict",
        description="The score the threshold, the gates, the summary, calibration, trends, compare and top-issues"
        " use: verdict (its level's score), expected (the judge's distribution's Σ p × score), combined (the"
        " mean of the reasoned verdict's score and the expected score of a verdict-first look: one more short"
        " call), checklist (the weighted mean of P(the good answer) to the rubric's yes/no questions: one more"
        " call), fitted (the verdict, expected, look and checklist scores combined with the weights shipped"
        " with the rubric, fit on public human-rated sets: two more calls). A row without the score named keeps"
        " its verdict's score and says so in score_from.",
    )
    turn_look: Annotated[bool, flag()] = Field(
        False,
        description="Ask, after each grading call, whether each turn's reply breaks the flow: a short call per reply,"
        " the judge shown that turn and the two exchanges before it, its yes/no read as P at its token; rows carry"
        " turn_p_problem and problem_turns (the turns from the rubric's turn threshold), where the conversation"
        " should be fixed first.",
    )
    uncertain_below: Annotated[float | None, flag()] = Field(
        None,
        gt=0,
        le=1,
        description="Mark a conversation uncertain when the judge's most likely level has less than this"
        " probability among all its alternatives (the mass outside the scale counts against it), or ties with"
        " another level: counted in the summary, queued in the review app.",
    )

    @field_validator("thresholds")
    @classmethod
    def _thresholds_in_range(cls, value: dict[str, float]) -> dict[str, float]:
        for name, threshold in value.items():
            check_threshold(threshold, f"the threshold of {name}")
        return value

    @field_validator("weights")
    @classmethod
    def _weights_positive(cls, value: dict[str, float]) -> dict[str, float]:
        for name, weight in value.items():
            if weight < 0:
                raise ValueError(f"the weight of {name} must not be negative")
        return value


class OutputOptions(Group):
    """Where the rows go and whether the file is resumed."""

    output: Annotated[str, flag("-o")] = Field(
        "flowrate-results.jsonl", description="Results JSONL file; - for stdout."
    )
    resume: Annotated[bool, flag()] = Field(
        False, description="Skip conversations the --output file already holds and append the rest."
    )
    retry_errors: Annotated[bool, flag()] = Field(
        False, description="Like --resume, and judge again the rows that ended in an error, replacing them."
    )
    verbose: Annotated[bool, flag("-v")] = Field(
        False, description="Print each verdict with its reason and key issues as it arrives."
    )
    output_parquet: Annotated[str | None, flag()] = Field(
        None,
        description="Also write the rows as a Parquet file here once the run is over (the JSONL output stays the"
        " record).",
    )


DURATION_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_s(text: str) -> float:
    """Seconds in a duration such as `90s`, `30m`, `2h`, `1d` or `1.5h`; ValueError if `text` is not one."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*", text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration: a number and a unit, s, m, h or d (30m, 2h, 1d, 90s)")
    return float(match[1]) * DURATION_UNITS_S[match[2]]


def moment_s(text: str, now_s: float) -> float:
    """Seconds since the epoch of `text`: an ISO 8601 date or time (UTC when it names no zone) or a
    duration before `now_s` (`duration_s`); ValueError if it is neither."""
    from datetime import UTC, datetime

    try:
        return now_s - duration_s(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"{text!r} is neither an ISO date or time (2026-03-01, 2026-03-01T06:00Z) nor a duration ago (1d, 2h)"
        ) from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


class SelectionOptions(Group):
    """Which conversations a run judges, and what an invalid or empty input means."""

    shard: Annotated[str | None, flag()] = Field(
        None, pattern=r"^\d+/\d+$", description="Judge slice I of N (I/N, 1-based), chosen by id hash."
    )
    sample: Annotated[float | None, flag()] = Field(
        None,
        gt=0,
        le=1,
        description="Judge this fraction of the conversations, chosen by a seeded hash of the id: the same on"
        " every run.",
    )
    sample_seed: Annotated[int, flag()] = Field(0, description="The seed of --sample.")
    limit: Annotated[int | None, flag()] = Field(
        None, ge=1, description="Judge at most N conversations (the first, in input order)."
    )
    min_words: Annotated[int | None, flag()] = Field(
        None, ge=0, description="Leave out conversations with fewer words than this."
    )
    only: Annotated[list[str], flag()] = Field(
        [], description="FIELD=VALUE: judge only conversations whose metadata has it; repeatable."
    )
    exclude: Annotated[list[str], flag()] = Field(
        [], description="FIELD=VALUE: leave out conversations whose metadata has it; repeatable."
    )
    skip_invalid: Annotated[bool, flag()] = Field(
        False, description="Judge the valid conversations and list the invalid ones as skipped."
    )
    allow_empty: Annotated[bool, flag()] = Field(
        False,
        description="Exit 0 when the input selects no conversation (by default that is exit 2, nothing to judge).",
    )
    date_field: Annotated[str | None, flag()] = Field(
        None, description="The metadata field with the chat's date. [default: chat_date, started_at or timestamp]"
    )
    format: Annotated[str | None, flag()] = Field(
        None,
        description="Read every input as this source format (`flowrate formats` lists them). [default: found from"
        " each file's first record]",
    )
    conversation_key: Annotated[str | None, flag()] = Field(
        None,
        description="In a log of calls, the field that names each call's conversation, tried before the keys its"
        " format knows (`flowrate formats` lists them): a span attribute (on the call's span or an ancestor), or a"
        " key of a call's metadata.",
    )
    closed_after: Annotated[str | None, flag()] = Field(
        None,
        description="Judge only closed conversations: one whose last message is newer than this (30m, 2h, 1d, 90s)"
        " is still open, skipped and counted.",
    )

    since: Annotated[str | None, flag()] = Field(
        None,
        description="Of a platform URL (phoenix+http://…, mlflow+http://…), read only the traces that started at or"
        " after this: an ISO date or time (2026-03-01, 2026-03-01T06:00Z) or a duration ago (1d, 2h).",
    )
    until: Annotated[str | None, flag()] = Field(
        None,
        description="Of a platform URL, read only the traces that started before this: an ISO date or time, or a"
        " duration ago (1d). [default: when the run starts]",
    )

    @field_validator("only", "exclude")
    @classmethod
    def _field_equals_value(cls, value: list[str]) -> list[str]:
        for item in value:
            if "=" not in item or not item.split("=", 1)[0]:
                raise ValueError(f"{item!r} must be FIELD=VALUE")
        return value

    @field_validator("closed_after")
    @classmethod
    def _a_duration(cls, value: str | None) -> str | None:
        if value is not None:
            duration_s(value)
        return value

    @field_validator("since", "until")
    @classmethod
    def _a_time(cls, value: str | None) -> str | None:
        if value is not None:
            moment_s(value, time.time())
        return value

    @property
    def closed_after_s(self) -> float | None:
        """`closed_after` in seconds (None: every conversation counts as closed)."""
        return None if self.closed_after is None else duration_s(self.closed_after)

    @property
    def shard_slice(self) -> tuple[int, int] | None:
        """(I, N) from `I/N`, 1 <= I <= N."""
        if self.shard is None:
            return None
        index, count = map(int, self.shard.split("/"))
        if not 1 <= index <= count:
            raise ConfigError(f"option shard: {self.shard!r} must be I/N with 1 <= I <= N")
        return index, count


GATES = ("min_pass_rate", "min_mean_score", "max_failures")


class GateOptions(Group):
    """What makes a run fail: gates for every metric, and per metric in the config file."""

    min_pass_rate: Annotated[float | None, flag()] = Field(
        None,
        ge=0,
        le=1,
        description="Gate: each metric passes the run when at least this share of its rows pass (0.9: up to 10 %"
        " may fail).",
    )
    min_mean_score: Annotated[float | None, flag()] = Field(
        None, ge=0, le=1, description="Gate: each metric's mean score must be at least this."
    )
    max_failures: Annotated[int | None, flag()] = Field(
        None, ge=0, description="Gate: each metric may have at most this many failing rows."
    )
    gates: dict[str, dict[str, float]] = Field({}, description="Per metric, gates of its own.")

    @field_validator("gates")
    @classmethod
    def _known_gates(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for metric, gates in value.items():
            for gate in gates:
                if gate not in GATES:
                    raise ValueError(f"unknown gate {gate!r} for {metric} (known: {', '.join(GATES)})")
        return value

    @property
    def default_gates(self) -> dict[str, float]:
        """The gates given for every metric."""
        named = {gate: getattr(self, gate) for gate in GATES}
        return {gate: float(limit) for gate, limit in named.items() if limit is not None}


class ReportOptions(Group):
    """The reports and the history a run writes besides its rows."""

    junit: Annotated[str | None, flag()] = Field(
        None, description="Write a JUnit XML report here (GitHub, GitLab, Jenkins)."
    )
    html: Annotated[str | None, flag()] = Field(None, description="Write a self-contained HTML report here.")
    github: Annotated[bool | None, flag()] = Field(
        None,
        description="Write GitHub's step summary and annotations (on by itself when GITHUB_ACTIONS=true, unless"
        " false in FLOWRATE_GITHUB or the config).",
    )
    history: Annotated[str | None, flag()] = Field(
        None, description="The history: a DuckDB file of every run's rows and labels."
    )

    @property
    def for_github(self) -> bool:
        """GitHub's step summary and annotations are written: `--github`, or GitHub Actions runs us
        (`GITHUB_ACTIONS=true`) and `github` is not false (the pytest plugin's batches: the
        session writes its own)."""
        return self.github if self.github is not None else os.environ.get("GITHUB_ACTIONS") == "true"

    @property
    def wanted(self) -> bool:
        """True when a report needs the run's rows kept (JUnit, HTML, GitHub)."""
        return bool(self.junit or self.html or self.for_github)


class PlatformOptions(Group):
    """Where the verdicts go besides the results file: back onto the platform's traces, and as
    OpenTelemetry evaluation events."""

    write_back: Annotated[bool, flag()] = Field(
        False,
        description="Write each verdict back where its conversation was read from (a phoenix+ or mlflow+ URL): a"
        " Phoenix session annotation, an MLflow assessment on the conversation's last trace; a rerun replaces it.",
    )
    otel_endpoint: Annotated[str | None, flag()] = Field(
        None,
        description="Post one gen_ai.evaluation.result event per row to this OTLP/HTTP receiver (JSON; /v1/logs"
        " when the URL has no path; headers from OTEL_EXPORTER_OTLP_HEADERS).",
    )
    otel_file: Annotated[str | None, flag()] = Field(
        None, description="Append one gen_ai.evaluation.result event per row to this file, as OTLP/JSON lines."
    )


class BatchOptions(Group):
    """Provider batch mode."""

    batch: Annotated[bool, flag()] = Field(
        False, description="Judge through the provider's Batch API (half the price, within 24 h): --engine batch."
    )
    batch_size: Annotated[int | None, flag()] = Field(
        None, ge=1, description="Requests per batch at most. [default: 47500]"
    )
    poll_interval: Annotated[float, flag()] = Field(
        60.0, ge=0, description="Seconds between polls of the batches, with jitter. [default: 60]"
    )
    batch_submit_only: Annotated[bool, flag()] = Field(False, description="Submit the batches and exit; collect later.")
    batch_no_fallback: Annotated[bool, flag()] = Field(
        False,
        description="Leave failed, expired and unparsable batch lines as error rows instead of judging them online.",
    )
    batch_export: Annotated[str | None, flag()] = Field(
        None, description="Only write the OpenAI-format batch request file here."
    )


class EngineOptions(Group):
    """What sends the requests."""

    engine: Annotated[Literal["local", "batch", "ray"], flag()] = Field(
        "local",
        description="What sends the requests: local (flowrate's own scheduler, in this process), batch (the"
        " provider's Batch API; --batch is its synonym) or ray (a Ray Data processor on a Ray cluster;"
        " pip install 'flowrate[ray]'). Every option that shapes a judgement works on each. [default: local]",
    )
    ray_address: Annotated[str | None, flag()] = Field(
        None,
        description="The Ray cluster --engine ray joins (ray://HOST:10001, which needs pip install 'ray[client]';"
        " or HOST:6379 on the cluster)."
        " [default: RAY_ADDRESS, else a local cluster for the run]",
    )
    ray_join_timeout: Annotated[float, flag()] = Field(
        10.0,
        gt=0,
        description="Seconds --engine ray waits to join its cluster before giving up with exit 2 (Ray alone"
        " retries a cluster that does not answer for good). [default: 10]",
    )


class RedactionRule(BaseModel):
    """A rule of the config's own for `--redact`: a regular expression (`pattern`) or a literal
    word or phrase (`term`, matched whole in any case), and the placeholder `type` it becomes (a
    name in capitals, digits and `_`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pattern: str | None = None
    term: str | None = None
    type: str = ""

    @model_validator(mode="after")
    def _one_of_pattern_or_term(self) -> RedactionRule:
        shown = {name: value for name, value in self.model_dump().items() if value}
        if (self.pattern is None) == (self.term is None) or (self.term is not None and not self.term.strip()):
            raise ValueError(f"{shown}: a redact rule has either a pattern or a term, and a type")
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", self.type):
            raise ValueError(f"{shown}: the type must be a name in capitals, digits and _ (ORDER, PROJECT_NAME)")
        if self.pattern == "":
            raise ValueError(f"{shown}: the pattern is empty; give a regular expression that matches what to replace")
        if self.pattern is not None:
            try:
                compiled = re.compile(self.pattern)
            except re.error as error:
                raise ValueError(
                    f"{shown}: the pattern {self.pattern!r} is not a regular expression: {error}"
                ) from None
            # an empty alternative (ORD-|) or a bare repeat (\d*) is the empty pattern's mistake again: it
            # matches between every two characters of every text
            if compiled.fullmatch(""):
                raise ValueError(
                    f"{shown}: the pattern {self.pattern!r} matches an empty text; give one that matches at least"
                    " one character (\\d+, not \\d*)"
                )
        return self


class RedactionOptions(Group):
    """What is replaced before the judge sees a conversation, and where the originals may be shown."""

    redact: Annotated[bool, flag()] = Field(
        False,
        description="Replace emails, phones, cards, IBANs, IPs, secret URLs, API keys and passwords, national ids"
        " and labelled dates of birth by placeholders (<EMAIL_1>) before anything is planned, cached, sent or written (docs/privacy.md).",
    )
    keep_originals: Annotated[bool, flag()] = Field(
        False,
        description="With --redact, the HTML report and the review app show the original text, read again from the"
        " local input files; the judge, the cache, the rows and the history still see only the redacted text.",
    )
    redact_rules: list[RedactionRule] = Field(
        [], description="Rules of your own: a list of {pattern: REGEX | term: TEXT, type: NAME}."
    )
    redact_regions: list[str] = Field(
        ["US", "BR", "RU"],
        description="The regions phone numbers are read as, after those a conversation's metadata names.",
    )


# The defaults the library's own signatures share with the options (`RubricMetric`, `Repetition`,
# `Rubric.build_messages`, `Scheduler`, `evaluate_conversations`, the failure modes' naming).
DEFAULT_MODEL: str = JudgeOptions.model_fields["model"].default
DEFAULT_THRESHOLD: float = MetricOptions.model_fields["threshold"].default
DEFAULT_LANGUAGE: str = PromptOptions.model_fields["language"].default
DEFAULT_CONCURRENCY: int = LimitOptions.model_fields["concurrency"].default
