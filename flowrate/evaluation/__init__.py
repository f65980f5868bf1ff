"""The evaluation stage: many conversations judged. `engine` schedules them with a concurrency
ceiling and tells listeners each row; `file_run` sets up a run over files; `resume`, `online` and
`provider_batch` are the ways it is judged."""
