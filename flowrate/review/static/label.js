// The labelling view: answers by key or click, stored at once; the judge shown once answered.
// Reads its data (the CSRF token, the secret path, the neighbours' addresses) from #state.
const state = JSON.parse(document.getElementById("state").textContent);
const saved = document.getElementById("saved");
// the answer being saved, or the one whose save failed (`failed`): the keys stay on this conversation
let unsaved = null, failed = false;
// #saved's text and its state (style.css colours "saved" as success, "failed" as a failure)
function say(text, outcome) { saved.textContent = text; saved.dataset.outcome = outcome; }
function go(href) {
  if (unsaved !== null) {
    if (failed) say("not saved: " + unsaved + "; answer again before moving on", "failed");
    else say("still saving " + unsaved + "…", "pending");
    return;
  }
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
  failed = false;
  say("saving " + value + "…", "pending");
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
  if (!ok) { failed = true; say("not saved: " + reply.error, "failed"); return; }
  unsaved = null;
  say("saved: " + reply.value, "saved");
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
