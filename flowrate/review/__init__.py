"""`flowrate review`: a local web app over results files and the history, for browsing runs and
labelling conversations; a skin over the library, like the CLI.

- `runs`: the runs shown (results files given, and the history's runs whose files exist), their
  totals per metric, a row's transcript, key issues by turn and the judge's exact request;
- `queue`: the labelling queue of a metric and the answers on its own scale;
- `guard`: the secret path, the token, the Host header, cross-site posts and body sizes,
  checked on every request;
- `pages`: the Jinja2 templates (`templates/`, autoescape on) and their static stylesheet and
  scripts (`static/`), every untrusted text through the `text` filter;
- `app`: Starlette's `Route` list and the navigation bar (`NAVIGATION`), and
  `server`: binding to 127.0.0.1 and printing the address with its token.

Starlette and uvicorn are imported only here, only when `flowrate review` runs.
"""
