"""Options for a run, from the command line, FLOWRATE_* variables, a config file and defaults.

Precedence: command line, then environment, then config file, then defaults. The command line
and the environment are both read by click (each option's `envvar`), so that `--help` names the
variable and a bad value in either is told as the option's; `resolve_settings` lays that over the
config file and the declarations' defaults. pydantic-settings (2.16) is not used for the layers:
its environment source reads a list option as JSON (FLOWRATE_METRIC=virtual_agent fails there,
where click splits on spaces), and a value merged from its sources no longer says which layer
gave it (the "(from FILE)" of a config file's bad value), nor does its YAML source tell an
unknown key, a file that is not a mapping, or unreadable YAML as flowrate does.
"""

from __future__ import annotations

from copy import deepcopy
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import ErrorDetails

from flowrate.errors import ConfigError
from flowrate.settings.groups import (
    BatchOptions,
    CacheOptions,
    EngineOptions,
    GateOptions,
    JudgeOptions,
    LimitOptions,
    MetricOptions,
    OutputOptions,
    PlatformOptions,
    PromptOptions,
    RedactionOptions,
    ReportOptions,
    RetryOptions,
    ScoreChoice,
    SelectionOptions,
)

DEFAULT_CONFIG = Path("configs/flowrate.yaml")


class EvalSettings(
    PlatformOptions,
    RedactionOptions,
    EngineOptions,
    BatchOptions,
    ReportOptions,
    GateOptions,
    SelectionOptions,
    OutputOptions,
    MetricOptions,
    PromptOptions,
    CacheOptions,
    LimitOptions,
    RetryOptions,
    JudgeOptions,
):
    """Every option of `flowrate eval`: all the groups of `groups`; the config file uses these names."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="after")
    def _batch_is_an_engine(self) -> EvalSettings:
        """`--batch` is `--engine batch`, kept as its synonym: either sets both (`--engine ray
        --batch` is left for `api.check_engine` to refuse)."""
        if self.engine == "batch":
            self.batch = True
        elif self.batch and self.engine == "local":
            self.engine = "batch"
        return self

    # -- the groups each layer is given --------------------------------------------------------
    @property
    def judge_settings(self) -> JudgeSettings:
        return JudgeSettings.of(self)

    @property
    def selection_settings(self) -> SelectionOptions:
        return SelectionOptions.of(self)

    @property
    def limit_settings(self) -> LimitOptions:
        return LimitOptions.of(self)

    @property
    def output_settings(self) -> OutputOptions:
        return OutputOptions.of(self)

    @property
    def gate_settings(self) -> GateOptions:
        return GateOptions.of(self)

    @property
    def report_settings(self) -> ReportOptions:
        return ReportOptions.of(self)

    @property
    def batch_settings(self) -> BatchOptions:
        return BatchOptions.of(self)

    @property
    def engine_settings(self) -> EngineOptions:
        return EngineOptions.of(self)

    @property
    def redaction_settings(self) -> RedactionOptions:
        return RedactionOptions.of(self)

    @property
    def platform_settings(self) -> PlatformOptions:
        return PlatformOptions.of(self)


# -- the options by concern: each layer is given only its group ----------------------------
class JudgeSettings(JudgeOptions, RetryOptions, PromptOptions, MetricOptions, CacheOptions):
    """What builds the metrics and their judge: the model and where it is served, the rubric
    and metrics, their thresholds and weights, retries, context and the cache; the fields are
    those of these groups, with the chat date's field (an option of the selection) and
    `metric_named`."""

    model_config = ConfigDict(frozen=True)

    date_field: str | None = None
    metric_named: bool = False  #: `--metric` was given (a `--rubric` alone replaces the default metric)

    @property
    def score_choice(self) -> ScoreChoice:
        """What a row is scored by and what the judge is asked for it."""
        return ScoreChoice(
            self.score, self.reply_order, self.uncertain_below, self.logprobs, self.reasoning_effort, self.turn_look
        )

    @classmethod
    def of(cls: type[JudgeSettings], settings: BaseModel) -> JudgeSettings:
        """This group of `settings`, with `metric_named` from what was given."""
        given = {name: getattr(settings, name) for name in cls.model_fields if name != "metric_named"}
        return cls.model_construct(**deepcopy(given), metric_named="metric" in settings.model_fields_set)


def load_config(path: Path | None) -> dict[str, Any]:
    """The config file's options; the default file is optional, a named one is not."""
    if path is None:
        if not DEFAULT_CONFIG.is_file():
            return {}
        path = DEFAULT_CONFIG
    import yaml

    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8-sig"))
    except OSError as error:
        raise ConfigError(f"{path}: cannot read config file: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: invalid YAML: {error}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a config file must be a mapping of option names to values")
    options = {str(key).replace("-", "_"): value for key, value in raw.items()}
    unknown = sorted(set(options) - set(EvalSettings.model_fields))
    if unknown:
        raise ConfigError(f"{path}: unknown option {unknown[0]!r} (known: {', '.join(EvalSettings.model_fields)})")
    return {"__file__": str(path), **options}


def resolve_settings(command_line: dict[str, Any], config_path: Path | None) -> EvalSettings:
    """Merge the layers. `command_line` holds what typer parsed, flags and FLOWRATE_* alike (None = not given)."""
    config = load_config(config_path)
    shown = config.pop("__file__", None)
    given = {key: value for key, value in command_line.items() if value is not None}
    merged = {**config, **given}
    for key in ("weights", "thresholds", "gates"):  # per name: the command line's names over the config's
        if isinstance(config.get(key), dict) and key in given:
            merged[key] = {**config[key], **given[key]}
    try:
        return EvalSettings.model_validate(merged)
    except ValidationError as error:
        first = error.errors()[0]
        name = str(first["loc"][0]) if first["loc"] else "options"
        origin = f" (from {shown})" if shown and name in config and command_line.get(name) is None else ""
        raise ConfigError(f"option {name}{origin}: {plain_validation_message(first)}") from None


_PLAIN = {
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be above {gt}",
    "less_than_equal": "must be at most {le}",
    "less_than": "must be below {lt}",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_parsing": "must be a number",
    "bool_parsing": "must be true or false",
    "string_type": "must be text",
    "dict_type": "must be a mapping of names to values",
    "list_type": "must be a list",
    "missing": "is required",
    "extra_forbidden": "is not a known option",
}
_PATTERN_MEANS = {r"^\d+/\d+$": "must look like I/N (for example 1/4)"}


def plain_validation_message(error: ErrorDetails) -> str:
    """A pydantic error as a person reads it: "must be at least 1", not "Input should be
    greater than or equal to 1"; a validator's own sentence without pydantic's "Value error, "."""
    kind, context = error.get("type", ""), error.get("ctx") or {}
    if kind == "extra_forbidden" and len(error["loc"]) > 1:  # a key inside an option's value (a redact rule)
        return f"{error['loc'][-1]!r} is not a known key"
    if kind == "value_error":
        return str(context.get("error", error["msg"])).removeprefix("Value error, ")
    if kind == "string_pattern_mismatch":
        return _PATTERN_MEANS.get(
            str(context.get("pattern")), f"does not have the expected form {context.get('pattern')}"
        )
    if kind in _PLAIN:
        text = _PLAIN[kind].format(**context)
        return f"{text} (got {error['input']!r})" if "input" in error and kind != "missing" else text
    return str(error["msg"]).removeprefix("Value error, ")
