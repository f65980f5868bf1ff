"""The one setup of flowrate's pages: autoescape on, untrusted text shown escaped, the escape
filters, static files inlined; and no page built or escaped by hand anywhere else."""

import re
from pathlib import Path

import pytest

import flowrate

PACKAGE_ROOT = Path(flowrate.__file__).parent


def _draw(source, **values):
    from flowrate.reports.templating import environment

    return environment("flowrate.reports").from_string(source).render(**values)


def test_every_printed_text_is_html_escaped_and_its_controls_and_bidi_shown():
    drawn = _draw("<p>{{ text }}</p>", text="<b>h5-\u202eevil\u202c</b>\x1b\u2028")
    assert drawn == "<p>&lt;b&gt;h5-\\u202eevil\\u202c&lt;/b&gt;\\x1b\\u2028</p>"
    assert _draw("{{ text }}", text="two\nlines\tand a tab") == "two\nlines\tand a tab"


def test_exact_keeps_the_characters_for_a_script_and_json_script_cannot_end_its_element():
    assert _draw('<a data-id="{{ id | exact }}">', id='"x\u202e') == '<a data-id="&#34;x\u202e">'
    drawn = _draw("<script>{{ value | json_script }}</script>", value={"a": "</script><!--\u2028"})
    assert drawn == '<script>{"a":"\\u003c/script\\u003e\\u003c!--\\u2028"}</script>'


def test_static_files_are_inlined_and_an_undefined_name_fails():
    import jinja2

    assert _draw("{{ static('base.css') }}") == (PACKAGE_ROOT / "reports/static/base.css").read_text()
    with pytest.raises(jinja2.UndefinedError):
        _draw("{{ missing }}")


def test_no_module_escapes_html_or_holds_a_page_outside_the_templates():
    elements = "html|head|body|style|script|meta|title|section|div|p|span|h[1-6]|table|thead|tbody|tr|th|td|ul|ol|li"
    elements += "|a|em|strong|code|svg|rect|text|circle|line|polyline|polygon|form|input|select|option|label|button"
    tag = re.compile(rf"[\"'][^\"'\n]*</?(?:{elements})[\s>/]")
    for module in PACKAGE_ROOT.rglob("*.py"):
        if module.parent.name == "review" or module.name == "templating.py":
            continue  # the review app is moved to templates apart
        text = module.read_text()
        assert "html.escape" not in text and "import html\n" not in text, module
        code = re.sub(r'"""[\s\S]*?"""', "", text)  # docstrings may name elements
        assert not tag.search(code), (module, tag.search(code))
