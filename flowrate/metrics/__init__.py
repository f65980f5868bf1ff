"""The metrics stage: the declared metric `protocol`, the `catalog` of metrics flowrate ships, the
rubric metric (one judge call per conversation that rates every criterion of a rubric) and the
offline `repetition` check."""
