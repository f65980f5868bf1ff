// The reviewer's name, when --reviewer did not give one: stored in a cookie by the server.
const state = JSON.parse(document.getElementById("state").textContent);
document.getElementById("name-form").addEventListener("submit", async event => {
  event.preventDefault();
  const response = await fetch(state.base + "/api/reviewer", {method: "POST", credentials: "same-origin",
    headers: {"content-type": "application/json", "x-flowrate-csrf": state.csrf},
    body: JSON.stringify({name: document.getElementById("name").value})});
  if (response.ok) { location.reload(); return; }
  const saved = document.getElementById("saved");
  saved.textContent = (await response.json()).error;
  saved.dataset.outcome = "failed";
});
