"""The one setup of flowrate's HTML pages: Jinja2 environments with autoescape on, the escape
filters of `reports.escape`, and static files inlined, since every page is one self-contained file.

A package that draws pages keeps its templates in `templates/` and its CSS and JavaScript in
`static/`, both package data. In its templates:

- every `{{ value }}` is HTML-escaped, and a string is shown through `escape.page_text` first (control
  and bidi characters as `\\xNN` or `\\uNNNN`), so untrusted text is drawn as its own, visible, text;
- `{{ value | exact }}` is HTML-escaped only, for an attribute a page's script reads back (an id);
- `{{ value | json_script }}` is `escape.json_for_script`, for a `<script type="application/json">`;
- `{{ static("name.css") }}` is the text of `static/name.css`, inlined as it is (flowrate's own file).
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import Any

import jinja2
from markupsafe import Markup, escape

from flowrate.reports.escape import json_for_script, page_text


def _shown(value: Any) -> Any:
    """Every string a template prints, but markup already made safe, shown through `page_text`."""
    return value if isinstance(value, Markup) or not isinstance(value, str) else page_text(value)


def _exact(value: Any) -> Markup:
    return escape(str(value))


def _json_script(value: Any) -> Markup:
    return Markup(json_for_script(value))


@cache
def environment(package: str) -> jinja2.Environment:
    """The Jinja2 environment for the pages of `package` (a dotted name, e.g. `"flowrate.reports"`):
    templates from its `templates/` folder, autoescape on for every template, strict about
    undefined names, with the filters `exact` and `json_script`, every printed string through
    `escape.page_text`, and `static(name)` giving the text of its `static/` file `name`. One
    environment per package, made once."""
    static = files(package) / "static"

    def inline(name: str) -> Markup:
        return Markup((static / name).read_text(encoding="utf-8"))

    env = jinja2.Environment(
        loader=jinja2.PackageLoader(package, "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=_shown,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["exact"] = _exact
    env.filters["json_script"] = _json_script
    env.globals["static"] = inline
    return env


def render(package: str, template: str, **values: Any) -> str:
    """The page `template` of `package` (`environment`) drawn with `values`."""
    return environment(package).get_template(template).render(**values)
