// One editor for every asset kind: the form edits the fields it shows, everything else in the
// stored data is carried through untouched, and Save is one PUT naming the revision it was based
// on (a change made elsewhere in the meantime is refused, never overwritten).
import { api } from "./api.js";

const form = document.getElementById("editor");
const id = form.dataset.id;
const kind = form.dataset.kind;
const original = JSON.parse(document.getElementById("asset-data").content.textContent);
const error = document.getElementById("editor-error");

function showError(message) {
  error.textContent = message;
  error.hidden = !message;
}

// -- rows: add, delete, reorder by keyboard (↑ ↓) and by drag ----------------------------------
let dragged = null;

function wireRow(row) {
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
    if (!dragged || dragged === row || dragged.parentElement !== row.parentElement) return;
    e.preventDefault();
    const box = row.getBoundingClientRect();
    row.parentElement.insertBefore(dragged, e.clientY < box.top + box.height / 2 ? row : row.nextSibling);
  });
}

form.addEventListener("click", (e) => {
  const button = e.target.closest("button");
  if (!button) return;
  const row = button.closest(".row");
  if (button.dataset.move && row) {
    const sibling = button.dataset.move === "up" ? row.previousElementSibling : row.nextElementSibling;
    if (sibling) {
      if (button.dataset.move === "up") sibling.before(row);
      else sibling.after(row);
      button.focus();
    }
  } else if (button.hasAttribute("data-remove") && row) {
    const next = row.nextElementSibling || row.previousElementSibling;
    row.remove();
    (next?.querySelector("input, textarea") || button.closest("fieldset").querySelector("[data-add]")).focus();
  } else if (button.hasAttribute("data-add")) {
    const list = button.closest("[data-list]");
    const row = list.querySelector("template.row-template").content.firstElementChild.cloneNode(true);
    list.querySelector(".rows").append(row);
    wireRow(row);
    row.querySelector("input, textarea").focus();
  }
});
for (const row of form.querySelectorAll(".rows > .row")) wireRow(row);

// -- collecting the edited data ------------------------------------------------------------------
function csv(text) {
  return text.split(",").map((s) => s.trim()).filter(Boolean);
}

function rowValues(row) {
  const out = {};
  for (const el of row.querySelectorAll("[data-f]")) {
    const key = el.dataset.f;
    if (el.type === "checkbox") out[key] = el.checked;
    else if (el.type === "number") out[key] = el.value === "" ? undefined : Number(el.value);
    else out[key] = el.value;
  }
  return out;
}

function collect() {
  const data = structuredClone(original);
  for (const el of form.querySelectorAll("[data-key]")) {
    data[el.dataset.key] = el.dataset.type === "csv" ? csv(el.value) : el.value;
  }
  const greetings = form.querySelector('[data-list="alternate_greetings"]');
  if (greetings) data.alternate_greetings = [...greetings.querySelectorAll("[data-item]")].map((t) => t.value).filter((t) => t.trim());
  if (kind === "preset") {
    data.fields = [...form.querySelectorAll('[data-list="fields"] .rows > .row')].map((row) => {
      const base = row.dataset.index >= 0 ? original.fields[Number(row.dataset.index)] : {};
      return { ...base, ...rowValues(row) };
    });
    const sampling = { ...(original.sampling || {}) };
    for (const el of form.querySelectorAll("[data-sampler]")) {
      if (el.value === "") delete sampling[el.dataset.sampler];
      else sampling[el.dataset.sampler] = Number(el.value);
    }
    if (Object.keys(sampling).length) data.sampling = sampling;
    else delete data.sampling;
  }
  if (kind === "lorebook") {
    const entries = original.book.entries || [];
    let next = Math.max(0, ...entries.map((e) => Number(e.id) || 0)) + 1; // new entries get ids no entry has
    data.book = { ...original.book, name: data.name };
    data.book.entries = [...form.querySelectorAll('[data-list="entries"] .rows > .row')].map((row) => {
      const base = row.dataset.index >= 0 ? entries[Number(row.dataset.index)] : { id: next++, extensions: {}, position: "before_char" };
      const values = rowValues(row);
      const entry = { ...base, ...values, name: values.comment, keys: csv(values.keys || "") };
      if (entry.insertion_order === undefined) delete entry.insertion_order;
      return entry;
    });
  }
  return data;
}

// -- the local draft: every change is kept in this browser until it is saved or discarded -------
const draftKey = `rp-editor-draft:${id}`;
let draftTimer = null;
function keepDraft() {
  clearTimeout(draftTimer);
  draftTimer = setTimeout(() => {
    try {
      localStorage.setItem(draftKey, JSON.stringify({ base: Number(form.dataset.revision), at: new Date().toISOString(), data: collect() }));
    } catch {
      // storage full or disabled: the draft simply is not kept
    }
  }, 400);
}
form.addEventListener("input", keepDraft);
form.addEventListener("change", keepDraft);
form.addEventListener("click", (e) => {
  if (e.target.closest("[data-move], [data-remove], [data-add]")) keepDraft();
});
const kept = (() => {
  try {
    return JSON.parse(localStorage.getItem(draftKey) || "null");
  } catch {
    return null;
  }
})();
if (kept && !form.dataset.restored) {
  const banner = document.getElementById("draft-banner");
  document.getElementById("draft-text").textContent =
    `You have unsaved changes from ${new Date(kept.at).toLocaleString()} (based on revision ${kept.base}).`;
  const restore = document.getElementById("draft-restore");
  restore.elements.draft.value = JSON.stringify(kept.data);
  restore.elements.base.value = String(kept.base);
  document.getElementById("draft-discard").addEventListener("click", () => {
    localStorage.removeItem(draftKey);
    banner.hidden = true;
  });
  banner.hidden = false;
}

form.addEventListener("submit", async (e) => {
  e.preventDefault();
  showError("");
  try {
    await api("PUT", `/assets/${encodeURIComponent(id)}`, { data: collect(), revision: Number(form.dataset.revision) });
    clearTimeout(draftTimer);
    localStorage.removeItem(draftKey);
    window.location.href = `/library/asset/${encodeURIComponent(id)}`;
  } catch (err) {
    showError(
      err.code === "asset.revision_conflict"
        ? "This was changed elsewhere since you opened it; nothing was saved. Reload to edit the latest version."
        : `${err.message}${err.pointer ? ` (at ${err.pointer})` : ""}`,
    );
  }
});

// -- avatar: replaced at once (it is its own revision) ---------------------------------------
document.getElementById("avatar-file")?.addEventListener("change", async (e) => {
  const file = e.target.files[0];
  if (!file) return;
  const body = new FormData();
  body.append("file", file, file.name);
  body.append("revision", form.dataset.revision);
  try {
    const record = await api("PUT", `/assets/${encodeURIComponent(id)}/avatar`, body);
    form.dataset.revision = String(record.revision);
    document.getElementById("revision").textContent = String(record.revision);
  } catch (err) {
    showError(err.message);
  }
});

// -- lorebook activation test: "why did this fire" ----------------------------------------------
document.getElementById("lore-test-run")?.addEventListener("click", async () => {
  const out = document.getElementById("lore-test-result");
  const text = document.getElementById("lore-test-text").value;
  try {
    const result = await api("POST", `/lorebooks/${encodeURIComponent(id)}/test`, { texts: [text] });
    const items = result.activated.map((a) => {
      const li = document.createElement("li");
      li.textContent = `${a.title || `#${a.entryId}`}: ${a.reason}${a.details && a.details.key ? ` (key “${a.details.key}”)` : ""}`;
      return li;
    });
    if (!items.length) {
      const li = document.createElement("li");
      li.textContent = "No entry fires for this text.";
      items.push(li);
    }
    out.replaceChildren(...items);
  } catch (err) {
    out.textContent = err.message;
  }
});
