"""The steps of flowrate's GitHub Action (`action.yml`), as a script a test can run without GitHub:
`python -m flowrate.ci.action key` and `python -m flowrate.ci.action run`.

The action passes its inputs as one JSON object, `INPUTS_JSON: ${{ toJSON(inputs) }}`
(a composite action's steps get no INPUT_<NAME> variables, and listing each input in each step's
env wrote it three times): `files`, every `flowrate eval` option of the same name (`model`,
`max-cost`, `min-pass-rate`, ...; a list option's values separated by spaces; a flag `true`) but
those the steps give themselves (`OWNED`), `config`, and its own: `baseline` (the path of the
baseline rows in the target branch), `baseline-file` (a baseline rows file already in the
workspace, such as a downloaded artifact), `tolerance`, `fail-on-any-regression` and
`results-dir`. The eval options' inputs in `action.yml` are generated from their declarations
(`python -m flowrate.ci.action inputs action.yml`), so none is missing and each is described as
`flowrate eval --help` describes it.

- `key` writes `cache-key` and `restore-keys` to GITHUB_OUTPUT for `actions/cache`: the judge (model,
  server), the rubric and metrics (the rubric file's and the config file's contents), then the
  conversation files' contents and the other options (`cache_keys`). Nothing of the workflow is in
  it, so a rerun after only the CI job changed restores the same cache and sends no request.
- `run` runs `flowrate eval` (its step summary and annotations on, as `--github` writes them; the
  rows, the HTML and the JUnit report in `results-dir`), then, on a pull request, `flowrate compare`
  with the baseline (its Markdown appended to the step summary), and writes the outputs
  `pass-rate`, `failures`, `failed-ids`, `failures-text`, `cost-usd`, `regressed` and `exit-code`,
  and for the cache's save step `cache-save-key` (`cache_save_key`: a run that stopped saves under
  a key of its own). It exits with eval's status when that is not 0, else compare's (1 on a
  regression).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import typing
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

from flowrate.errors import ExitCode
from flowrate.reports.escape import log_json, log_line
from flowrate.results.files import read_rows
from flowrate.results.summary import RunSummary
from flowrate.settings.groups import Flag
from flowrate.settings.options import EvalSettings

if typing.TYPE_CHECKING:
    from pydantic.fields import FieldInfo

# What the action writes, and never takes as an option of its own: the rows, the reports and
# GitHub's summary belong to the action's steps.
WRITTEN = {"output", "junit", "html", "github", "history", "output_parquet", "batch_export"}
# The eval options no input gives: what the action writes, and the response cache's folder, which
# is the one its cache steps restore and save (`eval --dry-run`, a command's own, judges nothing to
# gate on and is no setting)
OWNED = WRITTEN | {"cache_dir"}
INPUTS_VARIABLE = "INPUTS_JSON"  # the step's env: ${{ toJSON(inputs) }}
GENERATED = (  # the lines around the generated inputs in action.yml
    "  # flowrate eval's options, generated from their declarations: python -m flowrate.ci.action inputs action.yml\n",
    "  # end of flowrate eval's options\n",
)
PULL_REQUEST_EVENTS = {"pull_request", "pull_request_target"}
PARTIAL = "-partial-"  # in the key of a cache saved by a run that stopped before judging everything


def given(environ: Mapping[str, str], name: str) -> str:
    """The action's input `name`, stripped; "" when not given."""
    inputs = json.loads(environ.get(INPUTS_VARIABLE) or "{}")
    return str(inputs.get(name) or "").strip()


def passed_options() -> Iterator[tuple[str, FieldInfo, Flag]]:
    """The eval options the action's inputs give, in the order of the settings: each one's input
    name (its long flag without `--`), field and `Flag`."""
    for name, info in EvalSettings.model_fields.items():
        flag = next((item for item in info.metadata if isinstance(item, Flag)), None)
        if flag is not None and name not in OWNED:
            yield flag.flags(name)[0].removeprefix("--"), info, flag


def eval_options(environ: Mapping[str, str]) -> list[str]:
    """The `flowrate eval` arguments the action's inputs give: each input named as an option of
    eval's, in the order of the settings (a bool input "true" as the bare flag)."""
    arguments = []
    for input_name, info, flag in passed_options():
        option = "--" + input_name
        value = given(environ, input_name)
        if not value:
            continue
        kind = flag.cli_type or info.annotation
        if info.annotation is bool:
            arguments += [option] if value.lower() == "true" else []
        elif typing.get_origin(kind) is list:
            for item in value.split():
                arguments += [option, item]
        else:
            arguments += [option, value]
    if config := given(environ, "config"):
        arguments += ["--config", config]
    return arguments


def eval_inputs() -> str:
    """action.yml's inputs of the eval options (`passed_options`), as YAML: each described by its
    declaration's help, as `flowrate eval --help` shows it, and empty by default (not given: the
    config file, FLOWRATE_* or flowrate's default decide)."""
    from flowrate.cli.options import help_text

    lines = []
    for input_name, info, flag in passed_options():
        text = help_text(info)
        if info.annotation is bool:
            text = f"true: {text}"
        if typing.get_origin(flag.cli_type or info.annotation) is list:
            text += " Several: separated by spaces."
        description = json.dumps(f"{text} (flowrate eval --{input_name})", ensure_ascii=False)
        lines += [f"  {input_name}:", f"    description: {description}", "    required: false", '    default: ""']
    return "".join(line + "\n" for line in lines)


def write_eval_inputs(path: Path) -> None:
    """Rewrite the generated inputs of the action file `path` (between the `GENERATED` lines)."""
    text = path.read_text(encoding="utf-8")
    start, end = text.index(GENERATED[0]) + len(GENERATED[0]), text.index(GENERATED[1])
    path.write_text(text[:start] + eval_inputs() + text[end:], encoding="utf-8")


def _digest(paths: list[str], results: Path | None = None, options: str = "") -> str:
    """A hash of the files' names and contents (a missing file by its name alone); of a directory,
    the conversation files `flowrate eval` reads there, the `results` folder left out; and of
    `options`."""
    from flowrate.inputs.files import SCANNED_SUFFIXES

    digest = hashlib.sha256(options.encode() + b"\0")
    for path in sorted(paths):
        digest.update(path.encode() + b"\0")
        target = Path(path)
        files = [target]
        if target.is_dir():
            files = [file for file in sorted(target.rglob("*")) if file.suffix.lower() in SCANNED_SUFFIXES]
            if results is not None:
                files = [file for file in files if not file.resolve().is_relative_to(results.resolve())]
        for file in files:
            if file.is_file():
                digest.update(str(file).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()[:16]


def cache_keys(environ: Mapping[str, str]) -> tuple[str, list[str]]:
    """The response cache's key and its restore keys (prefixes, the closest first). The key is the
    judge and the rubric (the prefix), then the conversation files and every other option given
    to `flowrate eval` (a language or `samples` changes the requests): a run whose key a cache was
    saved under asks for nothing that cache lacks (`cache_save_key`). The restore keys are the
    caches saved by runs of this key that stopped (`-partial-`), then any of the judge and rubric."""
    judge = "|".join(given(environ, name) or "-" for name in ("model", "api-base", "metric"))
    rubric_files = [path for path in (given(environ, "rubric"), given(environ, "config")) if path]
    prefix = f"flowrate-{hashlib.sha256(judge.encode()).hexdigest()[:12]}-{_digest(rubric_files)}-"
    options = "\0".join(eval_options(environ))
    key = prefix + _digest(given(environ, "files").split(), _results_dir(environ), options)
    return key, [f"{key}{PARTIAL}", prefix]


def cache_save_key(environ: Mapping[str, str], status: int) -> str:
    """The key the response cache is saved under after `flowrate eval` exited with `status`
    ("": not saved). A run that judged every conversation (0, or 1: a gate failed) saves under the
    run's key, unless that key was restored (`CACHE_HIT`): it asked for nothing new. A run that
    stopped (3: the judge failed or was unreachable, `--max-cost` reached; 4; interrupted) saves
    under a key of its own run (`GITHUB_RUN_ID`, `GITHUB_RUN_ATTEMPT`; a cache's key is never
    saved twice), which the next run restores through its restore keys and never takes for a
    full hit: it pays for what is missing, once. Bad input (2) made no call."""
    key = environ.get("CACHE_KEY", "")
    if not key or status == ExitCode.USAGE:
        return ""
    if status in (ExitCode.OK, ExitCode.FAILED):
        return "" if environ.get("CACHE_HIT") == "true" else key
    run = environ.get("GITHUB_RUN_ID", "local"), environ.get("GITHUB_RUN_ATTEMPT", "1")
    return f"{key}{PARTIAL}{run[0]}-{run[1]}"


def _results_dir(environ: Mapping[str, str]) -> Path:
    return Path(given(environ, "results-dir") or "flowrate-results")


def write_outputs(path: str | None, values: dict[str, str]) -> None:
    """Append `values` to GITHUB_OUTPUT (`path`) as the runner reads them: `name=value`, and the
    heredoc form, with a delimiter the value does not hold, for a value with a line break."""
    if not path:
        return
    lines = []
    for name, value in values.items():
        if "\n" in value or "\r" in value:
            delimiter = f"ghadelimiter_{uuid.uuid4()}"
            while delimiter in value:  # as the runner's own toolkit does: never a line of the value
                delimiter = f"ghadelimiter_{uuid.uuid4()}"
            lines += [f"{name}<<{delimiter}", value, delimiter]
        else:
            lines.append(f"{name}={value}")
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in lines))


def baseline_rows(environ: Mapping[str, str], results: Path) -> Path | None:
    """The baseline of a pull request: `baseline-file` when given, else `baseline` as the target
    branch holds it (`git fetch` of GITHUB_BASE_REF, then `git show`); None when there is none."""
    if local := given(environ, "baseline-file"):
        return Path(local) if Path(local).is_file() else None
    base, path = environ.get("GITHUB_BASE_REF", ""), given(environ, "baseline")
    if not base or not path:
        return None
    fetched = subprocess.run(["git", "fetch", "--no-tags", "--depth=1", "origin", base], capture_output=True)
    if fetched.returncode != 0:
        return None
    shown = subprocess.run(["git", "show", f"FETCH_HEAD:{path}"], capture_output=True)
    if shown.returncode != 0:
        return None
    target = results / "baseline.jsonl"
    target.write_bytes(shown.stdout)
    return target


def _flowrate(*arguments: str, capture: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flowrate", *arguments], text=True, capture_output=capture)


def compare(environ: Mapping[str, str], rows: Path, results: Path) -> int | None:
    """On a pull request, `flowrate compare` of the baseline with `rows`, its Markdown appended to
    the step summary; its status (1: a regression; 2: a baseline it could not read), None when
    there was nothing to compare with."""
    if environ.get("GITHUB_EVENT_NAME") not in PULL_REQUEST_EVENTS:
        return None
    baseline = baseline_rows(environ, results)
    if baseline is None or not rows.is_file():
        print("::warning title=flowrate::no baseline rows of the target branch; nothing was compared", flush=True)
        return None
    arguments = ["compare", str(baseline), str(rows), "--markdown"]
    if tolerance := given(environ, "tolerance"):
        arguments += ["--tolerance", tolerance]
    if given(environ, "fail-on-any-regression").lower() == "true":
        arguments.append("--fail-on-any-regression")
    compared = _flowrate(*arguments, capture=True)
    sys.stderr.write(compared.stderr)
    if summary := environ.get("GITHUB_STEP_SUMMARY"):
        with open(summary, "a", encoding="utf-8") as handle:
            handle.write("\n" + compared.stdout)
    return compared.returncode


def outcome(rows: Path) -> dict[str, str]:
    """The outputs read from the run's rows: pass rate, failures, the failed ids (a JSON list, for
    `fromJSON`), each failure with its reason (a line each, the heredoc form), the cost. A step
    prints them: the ids and reasons in them are escaped as a CI log needs (`escape.log_json`,
    `escape.log_line`), so a failing row is one line and no line is a workflow command."""
    summary, failed = RunSummary(), []
    for order, row in enumerate(read_rows(rows) if rows.is_file() else [], start=1):
        summary.add(row, order)
        if row.error is None and not row.success:
            failed.append(row)
    rate = summary.pass_rate
    return {
        "pass-rate": "" if rate is None else f"{rate:.4f}",
        "failures": str(summary.failed),
        "failed-ids": log_json(list(dict.fromkeys(row.id for row in failed))),
        "failures-text": "\n".join(
            log_line(f"{row.id} ({row.metric}, {row.verdict or row.score}): {row.reason}") for row in failed
        ),
        "cost-usd": f"{summary.run_cost_usd:.6f}",
    }


def run(environ: Mapping[str, str]) -> int:
    """The action's main step (see the module's description); returns its exit status."""
    files = given(environ, "files").split()
    if not files:
        print("::error title=flowrate::the input `files` names no conversations file", flush=True)
        return 2
    results = _results_dir(environ)
    results.mkdir(parents=True, exist_ok=True)
    rows = results / "rows.jsonl"
    written = ["--output", str(rows), "--html", str(results / "report.html"), "--junit", str(results / "junit.xml")]
    status = _flowrate("eval", *files, *eval_options(environ), *written, "--github").returncode
    compared = compare(environ, rows, results)
    code = status or compared or 0
    outputs = outcome(rows)
    outputs.update({"regressed": "true" if compared == 1 else "false", "exit-code": str(code)})
    outputs["cache-save-key"] = cache_save_key(environ, status)
    write_outputs(environ.get("GITHUB_OUTPUT"), outputs)
    return code


def main(argv: list[str] | None = None) -> int:
    """`key` or `run` (the first of `argv`, default the command line's), over this environment;
    or `inputs ACTION_YML`, which rewrites the action file's generated inputs."""
    arguments = argv if argv is not None else sys.argv[1:]
    command = arguments[:1]
    if command == ["key"]:
        key, restore_keys = cache_keys(os.environ)
        write_outputs(os.environ.get("GITHUB_OUTPUT"), {"cache-key": key, "restore-keys": "\n".join(restore_keys)})
        return 0
    if command == ["run"]:
        return run(os.environ)
    if command == ["inputs"] and len(arguments) == 2:
        write_eval_inputs(Path(arguments[1]))
        return 0
    print("usage: python -m flowrate.ci.action key|run|inputs ACTION_YML", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
