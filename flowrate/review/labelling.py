"""The labelling view: one conversation of a metric's queue, the answer buttons of its scale,
the keys, and the judge shown only once the reviewer has answered (unless `--show-judge`)."""

from __future__ import annotations

from typing import Any

from flowrate.review.pages import judge_section, link, text, transcript, verdict_of
from flowrate.review.queue import Answer
from flowrate.review.runs import pinned_issues

# Keys other than the answers' own: next, previous, skip (the next item not answered yet).
NEXT_KEYS = ("j", "ArrowRight")
PREVIOUS_KEYS = ("k", "ArrowLeft")
SKIP_KEYS = ("s",)

SCRIPT = """
const state = JSON.parse(document.getElementById("state").textContent);
const saved = document.getElementById("saved");
let unsaved = null;  // the answer being saved, or the one whose save failed: the keys stay on this conversation
function go(href) {
  if (unsaved !== null) { saved.textContent = "not saved: " + unsaved + "; answer again before moving on"; return; }
  if (href) location.href = state.base + href;
}
function reveal(judge) {
  const box = document.getElementById("judge-box");
  if (!judge || box.childElementCount) return;
  const h = document.createElement("h2"); h.textContent = "The judge"; box.appendChild(h);
  const v = document.createElement("p"); v.append("verdict: ");
  const strong = document.createElement("strong"); strong.id = "verdict"; strong.textContent = judge.verdict; v.appendChild(strong);
  box.appendChild(v);
  const r = document.createElement("p"); r.id = "reason"; r.textContent = judge.reason; box.appendChild(r);
  for (const [turn, issues] of Object.entries(judge.by_turn)) {
    const div = document.querySelector('.turn[data-turn="' + Number(turn) + '"]');
    for (const issue of issues) { const p = document.createElement("div"); p.className = "issue"; p.textContent = issue; div && div.appendChild(p); }
  }
  if (judge.loose.length) {
    const ul = document.createElement("ul");
    for (const issue of judge.loose) { const li = document.createElement("li"); li.textContent = issue; ul.appendChild(li); }
    box.appendChild(ul);
  }
}
async function answer(value) {
  unsaved = value;
  saved.textContent = "saving " + value + "…";
  let reply, ok = false;
  try {
    const response = await fetch(state.base + "/api/answer", {method: "POST", credentials: "same-origin",
      headers: {"content-type": "application/json", "x-flowrate-csrf": state.csrf},
      body: JSON.stringify({metric: state.metric, id: state.id, value: value,
        comment: document.getElementById("comment").value})});
    ok = response.ok;
    reply = await response.json();
  } catch (error) {
    ok = false;
    reply = {error: "the server's answer could not be read (" + error.message + ")"};
  }
  if (!ok) { saved.textContent = "not saved: " + reply.error; return; }
  unsaved = null;
  saved.textContent = "saved: " + reply.value;
  document.getElementById("yours").textContent = "your answer: " + reply.value;
  document.querySelectorAll("#answers button").forEach(b => b.setAttribute("aria-pressed", String(b.dataset.value === reply.value)));
  reveal(reply.judge);
}
document.querySelectorAll("#answers button").forEach(b => b.addEventListener("click", () => answer(b.dataset.value)));
document.addEventListener("keydown", event => {
  if (event.target.closest && event.target.closest("textarea, input")) {
    if (event.key === "Escape") event.target.blur();
    return;
  }
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const button = document.querySelector('#answers button[data-key="' + CSS.escape(event.key) + '"]');
  if (button) { event.preventDefault(); button.click(); return; }
  if (state.next_keys.includes(event.key)) { event.preventDefault(); go(state.next); }
  else if (state.previous_keys.includes(event.key)) { event.preventDefault(); go(state.previous); }
  else if (state.skip_keys.includes(event.key)) { event.preventDefault(); go(state.skip); }
  else if (event.key === "c") { event.preventDefault(); document.getElementById("comment").focus(); }
});
"""


def judge_data(row: Any, turns: int) -> dict[str, Any]:
    """What the page's script shows of the judge once the reviewer has answered."""
    by_turn, loose = pinned_issues(row, turns)
    return {"verdict": verdict_of(row), "reason": row.reason or "", "by_turn": by_turn, "loose": loose}


def buttons(answers: list[Answer], current: str | None) -> str:
    """One button per value of the scale, its accessible name the value itself; the key beside it."""
    parts = []
    for answer in answers:
        pressed = "true" if answer.value == current else "false"
        key = f' data-key="{text(answer.key)}" aria-keyshortcuts="{text(answer.key)}"' if answer.key else ""
        hint = f" <kbd>{text(answer.key)}</kbd>" if answer.key else ""
        parts.append(
            f'<span class="answer"><button type="button" data-value="{text(answer.value)}"{key}'
            f' aria-pressed="{pressed}">{text(answer.value)}</button>{hint}</span>'
        )
    return f'<div id="answers" role="group" aria-label="your answer">{"".join(parts)}</div>'


def label_body(item: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The labelling view of one queue item, and the data its script reads. `item` holds the
    row, its case, the answers, the reviewer's own `current` answer (None: not answered),
    `show_judge`, the neighbours' addresses and the position."""
    row, case = item["row"], item["case"]
    turns = len(case.turns) if case is not None else 0
    visible = item["show_judge"] or item["current"] is not None
    by_turn, loose = pinned_issues(row, turns) if visible else ({}, [])
    mode = "the judge shown (--show-judge)" if item["show_judge"] else "blind: the judge is shown once you answer"
    moves = " · ".join(
        link(href, label) if href else text(label)
        for href, label in (
            (item["previous"], "previous (k, ←)"),
            (item["next"], "next (j, →)"),
            (item["skip"], "skip to the next unanswered (s)"),
        )
    )
    body = (
        f'<p id="position">{item["position"]} of {item["size"]} · {text(row.metric)} · reviewer'
        f' <strong id="reviewer">{text(item["reviewer"])}</strong> · {text(mode)}</p>'
        f'<h2 id="conversation">{text(row.id)}</h2>'
        f"{transcript(case, by_turn)}"
        f"<h2>Your answer</h2>{buttons(item['answers'], item['current'])}"
        f'<p><label for="comment">comment (optional; c to type, Esc to leave)</label><br>'
        f'<textarea id="comment" rows="2" maxlength="{item["comment_limit"]}">{text(item["comment"] or "")}</textarea></p>'
        f'<p id="saved" role="status"></p>'
        f'<p id="yours">{text("your answer: " + item["current"]) if item["current"] else ""}</p>'
        f'<p class="moves">{moves}</p>'
        f'<div id="judge-box">{judge_section(row, loose) if visible else ""}</div>'
        f"<p>{link('/row', 'the row in full', run=item['run'], id=row.id, metric=row.metric) if visible else ''}</p>"
    )
    data = {
        "csrf": item["csrf"],
        "base": item["base"],
        "metric": row.metric,
        "id": row.id,
        "next": item["next"],
        "previous": item["previous"],
        "skip": item["skip"],
        "next_keys": list(NEXT_KEYS),
        "previous_keys": list(PREVIOUS_KEYS),
        "skip_keys": list(SKIP_KEYS),
    }
    return body, data
