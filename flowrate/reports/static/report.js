"use strict";
const data = JSON.parse(document.getElementById("data").textContent);
const rows = data.rows.map(r => Object.assign(r, {status: r.error ? "error" : (r.success ? "pass" : "fail")}));
const body = document.querySelector("#results tbody");
let sortKey = null, ascending = true;
const escaped = new RegExp(data.escaped, "g");
function text(value) { return value === null || value === undefined ? "" : String(value); }
function hex(code, width) { return code.toString(16).padStart(width, "0"); }
function shown(value) { return text(value).replace(escaped, c => { const code = c.charCodeAt(0);
  return code < 0x100 ? "\\x" + hex(code, 2) : "\\u" + hex(code, 4); }); }
function cell(tr, value) { const td = document.createElement("td"); td.textContent = shown(value); tr.appendChild(td); }
function draw() {
  const needle = document.getElementById("filter").value.toLowerCase();
  const status = document.getElementById("status").value;
  let listed = rows.filter(r => (!status || r.status === status) &&
    (!needle || [r.id, r.metric, r.reason, r.error, (r.key_issues || []).join(" ")].join(" ").toLowerCase().includes(needle)));
  if (sortKey) listed.sort((a, b) => { const x = a[sortKey], y = b[sortKey];
    const order = (typeof x === "number" && typeof y === "number") ? x - y : text(x).localeCompare(text(y));
    return ascending ? order : -order; });
  body.replaceChildren();
  for (const r of listed) {
    const tr = document.createElement("tr");
    tr.className = "row " + r.status;
    tr.dataset.id = r.id;
    [r.id, r.metric, r.value, r.score_shown, r.status, r.cost_shown, r.error].forEach(v => cell(tr, v));
    tr.addEventListener("click", () => show(r.id));
    body.appendChild(tr);
  }
  document.getElementById("count").textContent = listed.length + " of " + rows.length + " rows";
}
function turnsOf(issue) {
  const m = /^\s*turns?\s+((?:\d+\s*(?:,|and|to|-|&)?\s*)+)/i.exec(issue);
  return m ? (m[1].match(/\d+/g) || []).map(Number) : [];
}
function show(id) {
  const box = document.getElementById("transcript");
  box.replaceChildren();
  const title = document.createElement("h2"); title.textContent = shown(id); box.appendChild(title);
  const turns = Object.hasOwn(data.transcripts, id) ? data.transcripts[id] : null;
  const issues = {};
  for (const r of rows.filter(r => r.id === id)) for (const issue of r.key_issues || [])
    for (const n of turnsOf(issue)) (issues[n] = issues[n] || []).push(r.metric + ": " + issue);
  if (!turns) { const p = document.createElement("p"); p.textContent = "No transcript: give the input files with --inputs."; box.appendChild(p); return; }
  turns.forEach((turn, index) => {
    const n = index + 1, div = document.createElement("div");
    div.className = "turn"; div.dataset.turn = n;
    const head = document.createElement("strong"); head.textContent = "turn " + n; div.appendChild(head);
    const user = document.createElement("div"); user.className = "user"; user.textContent = "user: " + shown(turn[0]); div.appendChild(user);
    const bot = document.createElement("div"); bot.className = "assistant";
    bot.textContent = "assistant: " + (turn[1] === null ? "(no reply)" : shown(turn[1])); div.appendChild(bot);
    for (const issue of issues[n] || []) { const p = document.createElement("div"); p.className = "issue"; p.textContent = shown(issue); div.appendChild(p); }
    box.appendChild(div);
  });
}
document.querySelectorAll("#results th").forEach(th => th.addEventListener("click", () => {
  ascending = sortKey === th.dataset.key ? !ascending : true; sortKey = th.dataset.key; draw(); }));
document.querySelectorAll("#top-issues a.example").forEach(a => a.addEventListener("click", event => {
  event.preventDefault(); show(a.dataset.id); document.getElementById("transcript").scrollIntoView(); }));
document.getElementById("filter").addEventListener("input", draw);
document.getElementById("status").addEventListener("change", draw);
draw();
