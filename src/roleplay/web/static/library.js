// The library: import by file picker or drag and drop (with the import report), make default,
// and delete with its impact shown first.
import { api, toast } from "./api.js";

function item(text, cls) {
  const li = document.createElement("li");
  if (cls) li.className = cls;
  li.textContent = text;
  return li;
}

function problemText(p) {
  return typeof p === "string" ? p : `${p.message || p.code}${p.pointer ? ` (at ${p.pointer})` : ""}`;
}

// One file's line in the import report: what was created (carried over), what was not, and the
// card's own prompts that stay isolated until trusted (with the button that trusts them).
function reportItem(result) {
  const li = document.createElement("li");
  const file = result.file || result.filename || "file";
  if (result.error) {
    li.className = "failed";
    li.textContent = `${file}: not imported: ${problemText(result.error)}`;
    return li;
  }
  li.className = "ok";
  const main = (result.assets && result.assets[0]) || { name: result.assetId, kind: result.kind };
  const head = document.createElement("p");
  head.textContent = `${file}: ${result.duplicate ? "already in the library as" : "imported as"} ${result.kind} “${main.name}”`;
  li.append(head);
  const details = document.createElement("ul");
  const created = (result.assets || []).slice(1);
  if (created.length) details.append(item(`carried over with it: ${created.map((a) => `${a.kind} “${a.name}”`).join(", ")}`));
  if (result.report) {
    const migrated = result.report.migrated || [];
    const notMigrated = result.report.notMigrated || [];
    details.append(item(`carried over: ${migrated.length} prompt${migrated.length === 1 ? "" : "s"}`));
    if (notMigrated.length) {
      // Often dozens of lines (every ST-only setting): one summary line that opens to the list.
      const li2 = document.createElement("li");
      const more = document.createElement("details");
      const summary = document.createElement("summary");
      summary.textContent = `not carried over: ${notMigrated.length} item${notMigrated.length === 1 ? "" : "s"}`;
      const list = document.createElement("ul");
      for (const p of notMigrated) list.append(item(problemText(p)));
      more.append(summary, list);
      li2.append(more);
      details.append(li2);
    }
  }
  for (const w of result.warnings || []) details.append(item(`not carried over or changed: ${problemText(w)}`));
  if (result.isolatedPrompts && !result.trusted) {
    const li2 = item(`The card brings its own ${result.isolatedPrompts.join(", ")}; they stay out of the prompt until you trust them. `);
    const trust = document.createElement("button");
    trust.type = "button";
    trust.textContent = "Trust these prompts";
    trust.addEventListener("click", async () => {
      try {
        await api("POST", `/assets/${encodeURIComponent(result.assetId)}/trust`, { trusted: true });
        trust.replaceWith("Trusted.");
      } catch (err) {
        toast(err.message);
      }
    });
    li2.append(trust);
    details.append(li2);
  }
  if (result.trusted) details.append(item("its own prompts are trusted"));
  if (details.children.length) li.append(details);
  const a = document.createElement("a");
  a.href = `/library/asset/${encodeURIComponent(result.assetId)}`;
  a.textContent = `Open ${main.name}`;
  li.append(a);
  return li;
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
  list.replaceChildren(...results.map(reportItem));
  // The list below shows what was just imported (the report stays).
  const fresh = new DOMParser().parseFromString(await (await fetch(window.location.href)).text(), "text/html");
  const listed = fresh.getElementById("asset-list");
  if (listed) document.getElementById("asset-list")?.replaceWith(document.adoptNode(listed));
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
    const q = keep && keep.checked ? "?keepLorebooks=true" : "";
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

// Search: the list narrows to the names containing the text (case-insensitive).
document.getElementById("library-search")?.addEventListener("input", (e) => {
  const needle = e.target.value.trim().toLocaleLowerCase();
  for (const li of document.querySelectorAll("#asset-list .asset-item")) {
    li.hidden = Boolean(needle) && !li.textContent.toLocaleLowerCase().includes(needle);
  }
});
