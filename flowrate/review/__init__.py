"""`flowrate review`: a local web app over results files and the history, for browsing runs and
labelling conversations; a skin over the library, like the CLI.

- `runs`: the runs shown (results files given, and the history's runs whose files exist), their
  totals per metric, a row's transcript, key issues by turn and the judge's exact request;
- `queue`: the labelling queue of a metric and the answers on its own scale;
- `guard`: the token, the Host header and cross-site posts, checked on every request;
- `pages`: the HTML, every untrusted text escaped, its CSS and script inline;
- `app`: the Starlette routes (`ROUTES`; `add_page` adds a page of another module), and
  `server`: binding to 127.0.0.1 and printing the address with its token.

Starlette and uvicorn are imported only here, only when `flowrate review` runs.
"""
