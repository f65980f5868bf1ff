"""The results stage: the rows a run writes (`rows`), results files (`files`, `merge`), what a run
tells its listeners (`events`), its summary and statistics (`summary`), gates (`gates`), and what
reports need of it (`book`). Metrics and evaluation make these; analysis and reports read them."""
