"""Untrusted text (ids, turns, metadata, the judge's reasons) made safe for each reader.

Conversations and judge replies are data from outside: every place that hands them to another
program (a browser, a CI runner, an XML parser, a Markdown renderer) escapes them
here, for that reader's rules.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

# C0 and C1 control characters, DEL included; tab and newline are kept only where a reader allows.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_ALL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
# XML 1.0 allows tab, newline, carriage return, U+0020..U+D7FF, U+E000..U+FFFD and U+10000..
_XML_FORBIDDEN = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def json_for_script(value: Any) -> str:
    """JSON to embed in an HTML `<script type="application/json">` element.

    `<`, `>` and `&` become `\\u003c`, `\\u003e` and `\\u0026`, so no text inside (`</script>`,
    `<!--<script>`, which would put the parser in its double-escaped state) can end or change
    the element; U+2028 and U+2029 are escaped for older script parsers. `JSON.parse` reads
    the same value back.
    """
    text = orjson.dumps(value).decode()
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def strip_control(text: str, keep_newlines: bool = False) -> str:
    """`text` without ANSI escapes and control characters (tab and newline kept if `keep_newlines`)."""
    text = _ANSI.sub("", str(text))
    return (_CONTROL if keep_newlines else _CONTROL_ALL).sub("", text)


def one_line_text(text: str) -> str:
    """Untrusted text for one line of a terminal or log: control characters gone, line breaks as spaces."""
    return strip_control(str(text).replace("\r\n", " ").replace("\n", " ").replace("\r", " "))


def safe_line(line: str) -> str:
    """A line for stdout or stderr that a CI runner cannot read as a workflow command.

    GitHub's runner (actions/runner, `ActionCommand.cs`) trims leading white space and acts on
    a line that then starts with `::` (`::error::`, `::stop-commands::TOKEN`, …): such a line
    gets a leading `> `. It also still reads the legacy form `##[name]data` anywhere in a line:
    `##[` becomes `##\\[`. `line` must be one line already (`terminal_text`, `one_line_text`).
    Lines that flowrate writes as annotations on purpose do not pass through here.
    """
    line = without_legacy_commands(line)
    return "> " + line if line.lstrip().startswith("::") else line


def without_legacy_commands(text: str) -> str:
    """Untrusted text placed inside a line of a CI log (a pytest test id): `##[`, the runner's
    legacy command form, which it reads anywhere in a line, as `##\\[`."""
    return text.replace("##[", "##\\[")


def log_line(text: str) -> str:
    """Untrusted text as one whole line of a CI log (stdout, stderr, a value a step prints): shown
    as `terminal_text` shows it (a CR or LF in an id cannot start a line of its own), then
    `safe_line` (it cannot start or hold a workflow command)."""
    return safe_line(terminal_text(text))


def log_text(text: str) -> str:
    """Untrusted text of lines separated by LF for a CI log: each line through `log_line` (a CR
    inside one shows as `\\x0d`)."""
    return "\n".join(log_line(line) for line in str(text).split("\n"))


def log_json(value: Any) -> str:
    """`value` as JSON on one line of a CI log that any JSON parser (GitHub's `fromJSON`) reads back
    the same: control characters, bidi controls and line separators as `\\uNNNN` escapes, and
    `#[` as `#\\u005b`, so no `##[` (the runner's legacy command form, read anywhere in a line)
    is printed; a JSON value never starts with `::`."""
    text = json.dumps(value, ensure_ascii=False)
    return _JSON_ESCAPED.sub(lambda found: f"\\u{ord(found.group()):04x}", text).replace("#[", "#\\u005b")


def safe_lines(text: str) -> str:
    """Text of one or more lines for stdout or stderr: each line, as a CI runner splits them (at
    CR, LF or CRLF), through `safe_line`; line breaks become LF."""
    return "\n".join(safe_line(line) for line in re.split(r"\r\n|\r|\n", text))


# The bidi controls (marks, embeddings, overrides, isolates) and the Unicode line and paragraph
# separators: they reorder or break what a reader sees (`h5-\u202eevil\u202c` reads `h5-live`).
_BIDI_AND_SEPARATORS = [0x061C, 0x200E, 0x200F, 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_SHOWN_CONTROL = {
    code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    for code in [*range(0x20), *range(0x7F, 0xA0), *_BIDI_AND_SEPARATORS]
}
# What a page shows escaped: the same, but for tab, LF and CR, which HTML draws as white space.
# A pattern that Python's `re` and JavaScript's `RegExp` read alike, so a page's script uses it too.
PAGE_ESCAPED = "[" + "".join(f"\\u{code:04x}" for code in _SHOWN_CONTROL if code not in (0x09, 0x0A, 0x0D)) + "]"
_PAGE_ESCAPED = re.compile(PAGE_ESCAPED)
_JSON_ESCAPED = re.compile("[" + "".join(f"\\u{code:04x}" for code in _SHOWN_CONTROL) + "]")


def terminal_text(text: str) -> str:
    """Untrusted text for one line a person reads on a terminal or in a CI log: every C0 and C1
    control character (ANSI escapes, line breaks, carriage returns), bidi control and Unicode
    line or paragraph separator shown as `\\xNN` or `\\uNNNN`, so none can act or reorder the
    line and the exact value stays readable."""
    return str(text).translate(_SHOWN_CONTROL)


def page_text(text: str) -> str:
    """Untrusted text for a page: the characters of `PAGE_ESCAPED` shown as `terminal_text` shows
    them, tab and line breaks kept; HTML escaping is the template's."""
    return _PAGE_ESCAPED.sub(lambda found: _SHOWN_CONTROL[ord(found.group())], str(text))


def xml_text(text: str) -> str:
    """`text` with every character XML 1.0 forbids (control characters, lone surrogates, U+FFFE)
    removed, ANSI escapes included; ElementTree then escapes the rest."""
    return _XML_FORBIDDEN.sub("", _ANSI.sub("", str(text)))


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~<>&])")


def markdown_text(text: str) -> str:
    """Untrusted text for one Markdown table cell or line: control characters and line breaks gone,
    Markdown's punctuation backslash-escaped, and `<`, `>`, `&` as entities, so it renders as the
    literal text and never as a heading, a link, an image, code or HTML."""
    flat = one_line_text(text)
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", flat)
    return escaped.replace("\\<", "&lt;").replace("\\>", "&gt;").replace("\\&", "&amp;")
