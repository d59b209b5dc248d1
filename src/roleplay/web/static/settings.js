// The settings page: every change goes through the JSON API naming the revision it read.
import { api, toast } from "./api.js";

const error = document.getElementById("settings-error");
function showError(message) {
  error.textContent = message;
  error.hidden = !message;
  if (message) error.scrollIntoView({ block: "nearest" });
}

async function run(fn, reload = true) {
  showError("");
  try {
    const out = await fn();
    if (reload) window.location.reload();
    return out;
  } catch (err) {
    showError(`${err.message}${err.pointer ? ` (at ${err.pointer})` : ""}`);
    return null;
  }
}

// Features: on turns on what it needs, off turns off what needs it (the server says which).
const features = document.getElementById("features");
for (const box of document.querySelectorAll("[data-feature]")) {
  box.addEventListener("change", () =>
    run(() =>
      api("POST", `/features/${encodeURIComponent(box.dataset.feature)}/${box.checked ? "enable" : "disable"}`, {
        revision: Number(features.dataset.revision),
      }),
    ),
  );
}

// General settings.
for (const form of document.querySelectorAll("form.setting")) {
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const raw = form.elements.value.value;
    let value;
    if (form.dataset.input === "number") value = raw === "" ? null : Number(raw);
    else if (form.dataset.input === "text") value = raw.trim() === "" ? null : raw;
    else {
      try {
        value = JSON.parse(raw);
      } catch {
        showError(`${form.dataset.key}: not valid JSON`);
        return;
      }
    }
    run(() => api("PUT", `/settings/${encodeURIComponent(form.dataset.key)}`, { value, revision: Number(form.dataset.revision) }));
  });
  form.querySelector("[data-reset]")?.addEventListener("click", () =>
    run(() => api("DELETE", `/settings/${encodeURIComponent(form.dataset.key)}?revision=${form.dataset.revision}`)),
  );
}

// Quick replies.
const quick = document.getElementById("quick");
document.getElementById("add-quick").addEventListener("submit", (e) => {
  e.preventDefault();
  const f = e.target.elements;
  run(() => api("POST", "/quick-replies", { label: f.label.value, text: f.text.value, revision: Number(quick.dataset.revision) }));
});
for (const button of document.querySelectorAll("[data-delete-quick]")) {
  button.addEventListener("click", () =>
    run(() => api("DELETE", `/quick-replies/${encodeURIComponent(button.dataset.deleteQuick)}?revision=${quick.dataset.revision}`)),
  );
}

// Models: one prompt through a route.
document.getElementById("model-test").addEventListener("submit", async (e) => {
  e.preventDefault();
  const out = document.getElementById("model-result");
  out.textContent = "Testing…";
  const model = e.target.elements.model.value.trim();
  const result = await run(() => api("POST", "/models/test", model ? { model } : {}), false);
  out.textContent = result
    ? `${result.route}${result.demo ? " (offline demo)" : ""} answered in ${result.latencyMs} ms: ${result.reply}`
    : "The test failed (see above).";
  if (result) toast("The model answered");
});

// Model keys: write-only; the server stores them in its home and only ever says whether one is set.
const keyForm = document.getElementById("model-key");
if (keyForm) {
  keyForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    const provider = keyForm.elements.provider.value;
    const key = keyForm.elements.key.value;
    keyForm.elements.key.value = ""; // never kept in the page
    await run(() => api("PUT", `/models/keys/${encodeURIComponent(provider)}`, { key }));
  });
  document.getElementById("model-key-forget").addEventListener("click", async () => {
    const provider = keyForm.elements.provider.value;
    await run(() => api("DELETE", `/models/keys/${encodeURIComponent(provider)}`));
  });
}

// Sub-agents (Agent mode's catalog): enable, route, delete, add; each write names the catalog revision.
async function loadSubagents() {
  const list = document.getElementById("subagent-list");
  let catalog;
  try {
    catalog = await api("GET", "/subagents");
  } catch (err) {
    const li = document.createElement("li");
    li.className = "meta";
    li.textContent = err.message;
    list.replaceChildren(li);
    return;
  }
  const rows = catalog.items.map((item) => {
    const li = document.createElement("li");
    li.className = "subagent";
    const label = document.createElement("label");
    label.className = "choice";
    const box = document.createElement("input");
    box.type = "checkbox";
    box.checked = item.enabled;
    box.addEventListener("change", () =>
      run(() => api("PUT", `/subagents/${encodeURIComponent(item.name)}`, { enabled: box.checked, revision: catalog.revision })),
    );
    const name = document.createElement("strong");
    name.textContent = item.name;
    label.append(box, " ", name);
    const contract = document.createElement("details");
    const summary = document.createElement("summary");
    summary.textContent = "When it is called";
    const text = document.createElement("p");
    text.textContent = item.usageContract;
    contract.append(summary, text);
    const route = document.createElement("form");
    route.className = "inline-form";
    const routeLabel = document.createElement("label");
    routeLabel.textContent = "Route ";
    const input = document.createElement("input");
    input.name = "route";
    input.value = item.route || "";
    input.placeholder = "the story's";
    routeLabel.append(input);
    const set = document.createElement("button");
    set.type = "submit";
    set.textContent = "Set route";
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "danger";
    remove.textContent = "Delete";
    remove.addEventListener("click", () =>
      run(() => api("DELETE", `/subagents/${encodeURIComponent(item.name)}?revision=${catalog.revision}`)),
    );
    route.append(routeLabel, set, remove);
    route.addEventListener("submit", (e) => {
      e.preventDefault();
      run(() => api("PUT", `/subagents/${encodeURIComponent(item.name)}`, { route: input.value.trim() || null, revision: catalog.revision }));
    });
    li.append(label, contract, route);
    return li;
  });
  list.replaceChildren(...rows);
  list.dataset.revision = String(catalog.revision);
}
loadSubagents();
document.getElementById("add-subagent").addEventListener("submit", (e) => {
  e.preventDefault();
  const f = e.target.elements;
  const revision = Number(document.getElementById("subagent-list").dataset.revision);
  run(() => api("POST", "/subagents", { name: f.name.value, usageContract: f.usageContract.value, instructions: f.instructions.value, revision }));
});
