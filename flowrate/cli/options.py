"""The commands' options, made from their declarations in `flowrate.settings.groups`: one
decorator, `takes`, stacks a command's groups onto it (as inspect_ai's `eval_options` does for
`eval` and `eval-set`). Typer reads the signature the decorator gives; the command is called
with one `Given` holding what the command line and the FLOWRATE_* variables gave."""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from flowrate.settings.groups import Flag

CONFIG = inspect.Parameter(
    "config",
    inspect.Parameter.KEYWORD_ONLY,
    default=None,
    annotation=Annotated[
        Path | None,
        typer.Option(
            "--config", envvar="FLOWRATE_CONFIG", help="Config file. [default: configs/flowrate.yaml when present]"
        ),
    ],
)


# typer's context, which says where each option's value came from (the command line or FLOWRATE_*)
CONTEXT = inspect.Parameter("typer_context", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)


@dataclass(frozen=True)
class Given:
    """What a command was given of its groups' options, by settings name (absent: not given),
    the `--config` file named (None: the default one, when present), and the names of those
    given on the command line itself (`typed`; the others came from FLOWRATE_*)."""

    values: dict[str, Any] = field(default_factory=dict)
    config: Path | None = None
    typed: frozenset[str] = frozenset()

    def settings(self, **fixed: Any) -> Any:
        """The `EvalSettings` of these options over the config file and the defaults; `fixed`
        overrides what was given."""
        from flowrate.settings.options import resolve_settings

        return resolve_settings({**self.values, **fixed}, self.config)


def _flag(info: FieldInfo) -> Flag | None:
    return next((item for item in info.metadata if isinstance(item, Flag)), None)


def _cli_type(info: FieldInfo, flag: Flag) -> Any:
    """What typer parses: the field's type, a `Literal` as text, always optional (None: not given)."""
    if flag.cli_type is not None:
        return flag.cli_type | None
    kinds = [kind for kind in typing.get_args(info.annotation) if kind is not type(None)]
    kind: Any = kinds[0] if isinstance(info.annotation, types.UnionType) else info.annotation
    return (str if typing.get_origin(kind) is Literal else kind) | None


def help_text(info: FieldInfo) -> str:
    """The field's description, and its default when the description does not tell it."""
    text = info.description or ""
    default = info.get_default(call_default_factory=True)
    if "[default:" in text or default is None or default is False or default in ([], {}):
        return text
    return f"{text} [default: {default}]"


def option_parameter(name: str, info: FieldInfo, flag: Flag) -> inspect.Parameter:
    """The command's parameter of the field `name`."""
    declared = typer.Option(*flag.flags(name), envvar=flag.env(name), help=help_text(info), show_default=False)
    return inspect.Parameter(
        flag.parameter(name),
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[_cli_type(info, flag), declared],
    )


def options_of(group: type[BaseModel]) -> dict[str, tuple[inspect.Parameter, Flag]]:
    """The command-line options of `group`, by settings name."""
    found = {}
    for name, info in group.model_fields.items():
        flag = _flag(info)
        if flag is not None:
            found[name] = (option_parameter(name, info, flag), flag)
    return found


def option_of(group: type[BaseModel], name: str) -> Any:
    """The typer option of the field `name` of `group`, for a command that reads it by itself:
    `Annotated[T, option_of(group, name)]`, where `T` is what the command is given
    (`cli_type_of(group, name)`; `tests/cli/test_option_groups.py` holds the two together)."""
    declared = typing.get_args(options_of(group)[name][0].annotation)[1]
    declared.declared_as = (group, name)
    return declared


def cli_type_of(group: type[BaseModel], name: str) -> Any:
    """What typer parses for the option `name` of `group` (None: not given)."""
    info = group.model_fields[name]
    flag = _flag(info)
    assert flag is not None, f"{group.__name__}.{name} is a config key only, not an option"
    return _cli_type(info, flag)


def takes(
    *groups: type[BaseModel], also: tuple[str, ...] = (), config: bool = True
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give the command every option of `groups`, the options named in `also` (of any group),
    and `--config` when `config`; the command takes `given: Given`. A parameter the command
    declares itself under an option's name replaces that option (judge-bench's `--model` is a
    list of judges)."""
    from flowrate.settings.options import EvalSettings

    single = {name: made for name, made in options_of(EvalSettings).items() if name in also}

    def stack(function: Callable[..., None]) -> Callable[..., None]:
        own = inspect.signature(function, eval_str=True).parameters
        offered = {name: made for group in groups for name, made in options_of(group).items()} | single
        generated = {name: made for name, made in offered.items() if made[0].name not in own}
        parameters = [parameter for name, parameter in own.items() if name != "given"]
        parameters += [parameter for parameter, _ in generated.values()]
        parameters += [CONFIG] if config else []
        parameters.append(CONTEXT)

        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> None:
            context = kwargs.pop(CONTEXT.name)
            values, typed = {}, set()
            for name, (parameter, flag) in generated.items():
                value = kwargs.pop(parameter.name)
                if value is None or value in ([], ()):  # not given (an empty repeatable option too)
                    continue
                values[name] = flag.parse(value) if flag.parse else value
                if context.get_parameter_source(parameter.name).name == "COMMANDLINE":  # not FLOWRATE_*
                    typed.add(name)
            function(*args, given=Given(values, kwargs.pop("config", None), frozenset(typed)), **kwargs)

        run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        return run

    return stack
