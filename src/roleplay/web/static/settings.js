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
