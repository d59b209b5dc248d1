// The library: import by file picker or drag and drop (with the import report), make default,
// and delete with its impact shown first.
import { api, toast } from "./api.js";

function item(text, cls) {
  const li = document.createElement("li");
  if (cls) li.className = cls;
  li.textContent = text;
  return li;
}

function describe(result) {
  if (result.error) return [`${result.file || "file"}: not imported: ${result.error.message}`, "failed"];
  const parts = [`${result.file || "file"}: imported as ${result.kind} “${result.name || result.assetId}”`];
  for (const key of ["carried", "carriedOver", "imported"]) if (Array.isArray(result[key]) && result[key].length) parts.push(`carried over: ${result[key].join(", ")}`);
  for (const key of ["dropped", "notCarried", "unsupported"]) if (Array.isArray(result[key]) && result[key].length) parts.push(`not carried over: ${result[key].join(", ")}`);
  if (Array.isArray(result.warnings) && result.warnings.length) {
    parts.push(`warnings: ${result.warnings.map((w) => (typeof w === "string" ? w : w.message || w.code)).join("; ")}`);
  }
  if (result.isolatedPrompts && !result.trusted) parts.push("the card has its own system prompt; it is kept isolated until you trust it");
  if (result.trusted) parts.push("its own prompts are trusted");
  return [parts.join(" · "), "ok"];
}

async function importFiles(files) {
  if (!files.length) return;
  const form = new FormData();
  for (const f of files) form.append("files", f, f.name);
  form.append("trust", document.getElementById("import-trust")?.checked ? "true" : "false");
  const report = document.getElementById("import-report");
  const list = document.getElementById("import-results");
  list.replaceChildren(item(`Importing ${files.length} file${files.length === 1 ? "" : "s"}…`));
  report.hidden = false;
  let results;
  try {
    results = await api("POST", "/assets/import", form);
  } catch (err) {
    list.replaceChildren(item(`Not imported: ${err.message}`, "failed"));
    return;
  }
  list.replaceChildren();
  for (const r of results) {
    const [text, cls] = describe(r);
    const li = item(text, cls);
    if (r.assetId) {
      const a = document.createElement("a");
      a.href = `/library/asset/${encodeURIComponent(r.assetId)}`;
      a.textContent = "Open";
      li.append(" ", a);
    }
    list.append(li);
  }
  report.dataset.done = "true";
  report.focus?.();
}

const picker = document.getElementById("import-files");
if (picker) {
  picker.addEventListener("change", () => importFiles([...picker.files]));
  const zone = document.getElementById("dropzone");
  zone.addEventListener("dragover", (e) => {
    e.preventDefault();
    zone.classList.add("over");
  });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (e) => {
    e.preventDefault();
    zone.classList.remove("over");
    importFiles([...e.dataTransfer.files]);
  });
}

const asset = document.getElementById("asset");
if (asset) {
  const id = asset.dataset.id;
  document.getElementById("make-default")?.addEventListener("click", async () => {
    try {
      await api("PUT", `/defaults/${encodeURIComponent(asset.dataset.kind)}`, { assetId: id });
      window.location.reload();
    } catch (err) {
      toast(err.message);
    }
  });

  const dialog = document.getElementById("delete-dialog");
  const impactBox = document.getElementById("delete-impact");
  const keep = document.getElementById("keep-lorebooks");
  const error = document.getElementById("delete-error");

  async function showImpact() {
    const q = keep && keep.checked ? "?keep_lorebooks=true" : "";
    try {
      const impact = await api("GET", `/assets/${encodeURIComponent(id)}/impact${q}`);
      const parts = [];
      const sessions = [...new Map(impact.sessions.map((s) => [s.sessionId, s])).values()];
      const p = document.createElement("p");
      p.textContent = sessions.length
        ? `${sessions.length} ${sessions.length === 1 ? "story uses" : "stories use"} it. They keep running, without it.`
        : "No story uses it.";
      parts.push(p);
      if (sessions.length) {
        const ul = document.createElement("ul");
        ul.className = "impact-sessions";
        for (const s of sessions) ul.append(item(s.title || s.sessionId));
        parts.push(ul);
      }
      if (impact.alsoDeleted.length) {
        const also = document.createElement("p");
        also.textContent = `Also deleted: ${impact.alsoDeleted.map((b) => b.name).join(", ")}`;
        parts.push(also);
      }
      impactBox.replaceChildren(...parts);
      impactBox.dataset.sessions = String(sessions.length);
    } catch (err) {
      impactBox.replaceChildren(item(err.message, "failed"));
    }
  }

  keep?.addEventListener("change", showImpact);
  document.getElementById("delete-asset").addEventListener("click", () => {
    error.hidden = true;
    dialog.returnValue = "cancel";
    dialog.showModal();
    showImpact();
  });
  dialog.addEventListener("close", async () => {
    if (dialog.returnValue !== "ok") return;
    const params = new URLSearchParams({ force: "true", revision: asset.dataset.revision });
    if (keep && keep.checked) params.set("keepLorebooks", "true");
    try {
      await api("DELETE", `/assets/${encodeURIComponent(id)}?${params}`);
      window.location.href = `/library/${encodeURIComponent(asset.dataset.kind)}`;
    } catch (err) {
      toast(err.message);
    }
  });
}
