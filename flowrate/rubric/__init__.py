"""The rubric stage: a metric's rubric as data (`model`: criteria, scales, worked examples), the
prompt built from it (`prompt`), and fitting a long conversation into the judge's context
(`fitting`). The packaged rubrics are data files in `flowrate/rubrics/`."""
