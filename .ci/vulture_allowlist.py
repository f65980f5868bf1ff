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
# set on other libraries' objects: Ray's DataContext, LiteLLM's module
_.enable_progress_bars
_.print_on_execution_start
_.suppress_debug_info
# flowrate/review/, being rewritten: the page-extension API and its row links
add_page
row_address
# in other developers' areas, used only by their tests today (reported to the lead, not removed here)
issue_turn  # analysis/top_issues.py
grouping_text  # analysis/top_issues.py
review_trail  # analysis/reviews.py
_.about  # analysis/judge_bench.py, each benchmark dataset's description
# arguments whose signature Python fixes: a signal handler's frame, __exit__'s exception
frame  # cli/entry.py
exc  # reports/console.py
