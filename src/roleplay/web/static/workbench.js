// The prompt workbench: reorder slots (drag, or ↑ ↓ by keyboard), idle and section-tag toggles;
// Save writes the whole slot list as one revision-checked profile change, then the Writer
// preview is rebuilt by the server.
import { api } from "./api.js";

const bench = document.getElementById("workbench");
const sid = bench.dataset.session;
const list = document.getElementById("slots");
const error = document.getElementById("workbench-error");
let dragged = null;

function showError(message) {
  error.textContent = message;
  error.hidden = !message;
}

for (const row of list.children) {
  row.addEventListener("dragstart", (e) => {
    dragged = row;
    e.dataTransfer.effectAllowed = "move";
    row.classList.add("dragging");
  });
  row.addEventListener("dragend", () => {
    row.classList.remove("dragging");
    dragged = null;
  });
  row.addEventListener("dragover", (e) => {
    if (!dragged || dragged === row) return;
    e.preventDefault();
    const box = row.getBoundingClientRect();
    list.insertBefore(dragged, e.clientY < box.top + box.height / 2 ? row : row.nextSibling);
  });
}

list.addEventListener("click", (e) => {
  const button = e.target.closest("button[data-move]");
  if (!button) return;
  const row = button.closest(".row");
  const sibling = button.dataset.move === "up" ? row.previousElementSibling : row.nextElementSibling;
  if (!sibling) return;
  if (button.dataset.move === "up") sibling.before(row);
  else sibling.after(row);
  button.focus();
});

function slots() {
  return [...list.children].map((row) => {
    const slot = JSON.parse(row.dataset.slot);
    slot.idle = row.querySelector('[data-f="idle"]').checked;
    slot.sectionTag = row.querySelector('[data-f="sectionTag"]').checked;
    return slot;
  });
}

async function save(contextBuild) {
  showError("");
  try {
    const out = await api("PATCH", `/sessions/${encodeURIComponent(sid)}/profile`, {
      patch: { contextBuild },
      revision: Number(bench.dataset.revision),
    });
    bench.dataset.revision = String(out.revision);
  } catch (err) {
    showError(`${err.message}${err.pointer ? ` (at ${err.pointer})` : ""}`);
    return false;
  }
  const r = await fetch(`/s/${encodeURIComponent(sid)}/workbench/preview`, { credentials: "same-origin" });
  const fresh = new DOMParser().parseFromString(await r.text(), "text/html").getElementById("preview");
  document.getElementById("preview").replaceWith(document.adoptNode(fresh));
  return true;
}

document.getElementById("save-layout").addEventListener("click", () => save({ slots: slots() }));
document.getElementById("reset-layout").addEventListener("click", async () => {
  if (await save(null)) window.location.reload();
});

// Custom content: the profile's own prompts (a new one gets a slot of its own, placed by the layout rule).
const customBox = document.querySelector("section.custom");
const custom = JSON.parse(customBox.dataset.custom);
async function saveCustom(list) {
  showError("");
  try {
    await api("PATCH", `/sessions/${encodeURIComponent(sid)}/profile`, { patch: { customPrompts: list }, revision: Number(bench.dataset.revision) });
    window.location.reload();
  } catch (err) {
    showError(`${err.message}${err.pointer ? ` (at ${err.pointer})` : ""}`);
  }
}
document.getElementById("add-custom").addEventListener("submit", (e) => {
  e.preventDefault();
  const f = e.target.elements;
  saveCustom([...custom, { id: `custom-${Date.now().toString(36)}`, title: f.title.value, text: f.text.value }]);
});
for (const button of document.querySelectorAll("[data-delete-custom]")) {
  button.addEventListener("click", () => saveCustom(custom.filter((c) => c.id !== button.dataset.deleteCustom)));
}
