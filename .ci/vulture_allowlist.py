"""Names vulture (`.ci/run`) reports unused in `flowrate/` that are used where it cannot see:
by users of the public API, by other libraries, or read by name. Each line says which.
Decorated commands, validators and migrations are left out by `[tool.vulture]` in pyproject.toml."""

# ruff: noqa: B018, F821
# the lazy public API: `import flowrate; flowrate.evaluate_files` (PEP 562)
__getattr__
__dir__
# results the public API returns and `asdict` writes out (JSON output, reports): read by users
_.pearson  # analysis/agreement.py AgreementFigures
_.improvements  # analysis/compare.py MetricComparison
_.base_rate  # analysis/judge_report.py
_.true_positive_rate  # analysis/judge_report.py
_.true_negative_rate  # analysis/judge_report.py
_.evaluation_cost  # results/rows.py MetricResult, eval_lib's field names
_.evaluation_log  # results/rows.py MetricResult
_.test_case  # results/rows.py ConversationResult
_.metrics_data  # results/rows.py ConversationResult
# public API for a caller's own Ray cluster with GPUs (documented in flowrate.api)
vllm_processor
_.fn  # evaluation/ray_http.py tell_desk: the UDF class Ray Data's processor builds its HTTP stage from
# set on other libraries' objects: Ray's DataContext, LiteLLM's module
_.enable_progress_bars
_.print_on_execution_start
_.suppress_debug_info
_.about  # analysis/judge_bench.py, each benchmark dataset's description (shown in --help's list of sets)
# pydantic fields read by name (getattr over a group's fields) or written out to JSON
min_pass_rate  # settings/groups.py GateOptions, read through the group
min_mean_score
max_failures
reruns  # analysis/judge_bench.py BenchEstimate, in judge-bench's JSON
outside_prob  # results/rows.py EvaluationRow, written out on every row (docs/output.md)
verdict_first_probs  # results/rows.py EvaluationRow, written out on every row
raw_reply  # results/rows.py, kept on the row for the review app's raw-reply view
# set for other libraries: typer reads a function's __signature__, rich a column's overflow
_.__signature__
_.overflow
# arguments whose signature Python fixes: a signal handler's frame, __exit__'s exception
frame  # cli/entry.py
exc  # reports/console.py
# a Protocol's member, implemented by each engine and called through `engine_for`'s result
_.__call__  # evaluation/engines.py Engine
# read by tests/cli/test_option_groups.py, which holds a command's own option type to its group's declaration
_.declared_as
cli_type_of
# HTMLParser calls its handlers by name (inputs/sources/dialogue.py)
_.handle_starttag
_.handle_endtag
_.handle_data
_.longrepr  # ci/pytest_plugin.py: set on pytest's TestReport, which pytest's reporters read
# the source readers, imported by name when first needed (inputs/sources/registry.py READERS)
AnthropicReader
DialogflowCXReader
IntercomReader
LangfuseReader
LangSmithReader
MlflowReader
NativeReader
OpenAIChatReader
OpenAIResponsesReader
OpenInferenceReader
OtelReader
RasaReader
ServiceNowReader
ShareGPTReader
ZendeskReader
# public API of the judging step for an engine of one's own: a request read back from its JSON (docs/python-api.md)
_.from_dict  # metrics/step.py JudgeRequest
# a row field written to the results file (docs/output.md), read by its readers, not by flowrate
checklist_p_yes
# GPT-4's released ratings as a second reference, read by bench/card.py (docs/judges.md)
frontier_ratings
# the per-turn look's threshold fit on dialogues it is not reported on, by bench/turn_look.py (docs/judges.md)
fit_threshold
# where that threshold was fit, a field of the combination file that people read
_.turn_fit_on  # rubric/combination.py Combination
# what llama-cpp-python's chat handler calls to generate, caught for its prompt (judge/local_choices.py)
_.create_completion  # _PromptCatcher
