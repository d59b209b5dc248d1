// The live chat page: send, the streamed reply (SSE), stop, message actions, reply options,
// quick replies. The server paints every message (markdown rendered and sanitised there); this
// module only shows the live draft as plain text and re-fetches the painted list afterwards.
import { api, isSendKey, toast } from "./api.js";
import { highlightDialogue } from "./dialogue.js";
import { wireWiki } from "./wiki.js";

const chat = document.getElementById("chat");
const sid = chat.dataset.session;
const log = document.getElementById("log");
const form = document.getElementById("composer");
const draft = document.getElementById("draft");
const sendButton = document.getElementById("send");
const stopButton = document.getElementById("stop");
const writing = document.getElementById("writing");
const elapsed = document.getElementById("elapsed");
const errorBox = document.getElementById("chat-error");
const newText = document.getElementById("new-text");
const confirmDialog = document.getElementById("confirm");

let runningTurn = chat.dataset.running || null;
// A turn another process runs (another server, `rp say`): this server cannot stop it and may not
// hear its events (SQLite), so the page asks whether the story is still held, then repaints.
let elsewhere = chat.dataset.elsewhere === "true";
const elsewhereNote = document.getElementById("writing-elsewhere");
let elsewherePoll = null;
let live = null; // the article the streamed reply is written into
let startedAt = 0;
let timer = null;
let editing = null;
const ended = new Set(); // turns whose turn/end arrived (a fast turn can end before its POST answers)

// -- scrolling: follow the story only while the reader is at the bottom -------------------------
function pinned() {
  return log.scrollHeight - log.scrollTop - log.clientHeight < 48;
}
function toBottom() {
  log.scrollTop = log.scrollHeight;
  newText.hidden = true;
}
function follow(wasPinned) {
  if (wasPinned) toBottom();
  else newText.hidden = false;
}
newText.addEventListener("click", toBottom);
log.addEventListener("scroll", () => {
  if (pinned()) newText.hidden = true;
});

// -- busy state ---------------------------------------------------------------------------------
function showError(message) {
  errorBox.textContent = message;
  errorBox.hidden = !message;
}

function setBusy(turnId) {
  runningTurn = turnId;
  const busy = Boolean(turnId);
  chat.dataset.busy = busy ? "true" : "false";
  if (!busy) elsewhere = false;
  chat.dataset.elsewhere = elsewhere ? "true" : "false";
  sendButton.hidden = busy;
  stopButton.hidden = !busy || elsewhere;
  writing.hidden = !busy || elsewhere;
  elsewhereNote.hidden = !(busy && elsewhere);
  if (elsewhere && !elsewherePoll) elsewherePoll = setTimeout(checkElsewhere, 1500);
  for (const b of log.querySelectorAll(".msg-actions button, .reply-option")) b.disabled = busy || Boolean(editing);
  for (const b of document.querySelectorAll("[data-mode]")) b.disabled = busy; // the mode changes only while idle
  clearInterval(timer);
  if (busy) {
    startedAt = performance.now();
    elapsed.textContent = "";
    timer = setInterval(() => {
      elapsed.textContent = `${Math.round((performance.now() - startedAt) / 1000)} s`;
    }, 1000);
    if (document.activeElement === sendButton || document.activeElement === draft) stopButton.focus();
  } else if (document.activeElement === stopButton || document.activeElement === document.body) {
    draft.focus();
  }
}

async function checkElsewhere() {
  elsewherePoll = null;
  if (!elsewhere) return;
  try {
    const now = await api("GET", `/sessions/${encodeURIComponent(sid)}/running`);
    if (!now.leased) {
      elsewhere = false;
      setBusy(null);
      await refresh();
      return;
    }
  } catch {
    // a dropped connection: ask again
  }
  if (elsewhere && !elsewherePoll) elsewherePoll = setTimeout(checkElsewhere, 1500);
}

// -- the server-painted list --------------------------------------------------------------------
let refreshing = null;
let again = false;

async function refresh() {
  if (refreshing) {
    again = true;
    return refreshing;
  }
  refreshing = (async () => {
    do {
      again = false;
      const wasPinned = pinned();
      const r = await fetch(`/s/${encodeURIComponent(sid)}/fragment?show=${chat.dataset.show || 0}`, { credentials: "same-origin" });
      if (!r.ok) break;
      const doc = new DOMParser().parseFromString(await r.text(), "text/html");
      for (const id of ["messages", "state-panel"]) {
        const fresh = doc.getElementById(id);
        const old = document.getElementById(id);
        if (fresh && old) old.replaceWith(document.adoptNode(fresh));
      }
      live = null;
      highlightDialogue(document.getElementById("messages"));
      setBusy(runningTurn);
      follow(wasPinned);
    } while (again);
  })();
  try {
    await refreshing;
  } finally {
    refreshing = null;
  }
}

function liveArticle() {
  if (live && live.isConnected) return live;
  live = document.createElement("article");
  live.className = "msg assistant streaming";
  live.setAttribute("aria-busy", "true");
  live.dataset.chunks = "0";
  const body = document.createElement("div");
  body.className = "msg-main";
  const text = document.createElement("div");
  text.className = "msg-body live-text";
  body.append(text);
  live.append(body);
  document.getElementById("messages").append(live);
  return live;
}

function appendUser(text) {
  const a = document.createElement("article");
  a.className = "msg user pending";
  const body = document.createElement("div");
  body.className = "msg-main";
  const p = document.createElement("div");
  p.className = "msg-body";
  p.textContent = text;
  body.append(p);
  a.append(body);
  document.getElementById("reply-options")?.remove();
  document.getElementById("messages").append(a);
}

// -- the event stream: resume exactly after the painted head -------------------------------------
const events = new EventSource(`/api/v1/sessions/${encodeURIComponent(sid)}/events?after=${chat.dataset.head}`);
events.addEventListener("turn/start", (e) => {
  const data = JSON.parse(e.data);
  setBusy((data.payload && data.payload.turnId) || "running");
});
events.addEventListener("assistant/chunk", (e) => {
  const data = JSON.parse(e.data);
  const wasPinned = pinned();
  const article = liveArticle();
  const text = article.querySelector(".live-text");
  if (data.reset) text.textContent = "";
  if (data.text) text.textContent += data.text;
  article.dataset.chunks = String(Number(article.dataset.chunks) + 1);
  chat.dataset.chunksSeen = String(Number(chat.dataset.chunksSeen || 0) + 1); // streamed deltas shown on this page
  if (!runningTurn && !ended.has(data.turnId)) setBusy(data.turnId || "running");
  follow(wasPinned);
});
events.addEventListener("turn/end", (e) => {
  const data = JSON.parse(e.data);
  if (data.payload && data.payload.turnId) ended.add(data.payload.turnId);
  // Screen readers hear that the reply is done (the streamed text itself is not read token by token).
  const outcome = data.payload && data.payload.outcome;
  document.getElementById("announce").textContent =
    outcome && outcome !== "completed" ? `The turn ended: ${outcome}.` : `${document.getElementById("writing-label").textContent.replace(/ is writing…$/, "")} replied.`;
  setBusy(null);
  refresh();
});
// A message action from another tab or client (edit, delete, swipe) ends as a command.
events.addEventListener("command/done", () => {
  if (!runningTurn) refresh();
});
events.addEventListener("error", () => {
  chat.dataset.stream = events.readyState === EventSource.CLOSED ? "closed" : "reconnecting";
});
events.addEventListener("open", () => {
  chat.dataset.stream = "open";
});

// -- sending --------------------------------------------------------------------------------------
async function start(path, body) {
  showError("");
  try {
    const accepted = await api("POST", `/sessions/${encodeURIComponent(sid)}${path}`, body);
    if (!runningTurn && !ended.has(accepted.turnId)) setBusy(accepted.turnId);
    return true;
  } catch (err) {
    showError(err.code === "run.busy" ? "A reply is still being written; wait for it or press Stop." : err.message);
    return false;
  }
}

async function sendText(text) {
  if (!text.trim() || runningTurn) return;
  appendUser(text);
  toBottom();
  const ok = await start("/turns", { text });
  if (ok) {
    draft.value = "";
  } else {
    refresh();
  }
}

form.addEventListener("submit", (e) => {
  e.preventDefault();
  sendText(draft.value);
});
draft.addEventListener("keydown", (e) => {
  if (isSendKey(e)) {
    e.preventDefault();
    sendText(draft.value);
  } else if (e.key === "ArrowUp" && !draft.value && !runningTurn && !editing) {
    // ↑ in an empty composer edits your last message.
    const mine = [...document.querySelectorAll('#messages article[data-role="user"]')].pop();
    if (mine) {
      e.preventDefault();
      beginEdit(mine);
    }
  }
});
stopButton.addEventListener("click", async () => {
  try {
    await api("POST", `/sessions/${encodeURIComponent(sid)}/abort`, runningTurn && runningTurn !== "running" ? { turnId: runningTurn } : {});
  } catch (err) {
    if (err.code !== "run.not_running") showError(err.message);
  }
});
document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && runningTurn && !editing && !confirmDialog.open) stopButton.click();
});

// -- quick replies insert at the configured cursor; reply options send --------------------------
for (const button of document.querySelectorAll(".quick-reply")) {
  button.addEventListener("click", () => {
    const cursor = button.closest("[data-cursor]")?.dataset.cursor || "end";
    const text = button.dataset.text;
    const at = draft.selectionStart ?? draft.value.length;
    const end = draft.selectionEnd ?? at;
    draft.value = draft.value.slice(0, at) + text + draft.value.slice(end);
    draft.focus();
    if (cursor === "start") draft.setSelectionRange(at, at);
    else if (cursor === "select") draft.setSelectionRange(at, at + text.length);
    else draft.setSelectionRange(at + text.length, at + text.length);
  });
}

// -- message actions ------------------------------------------------------------------------------
function ask(title, text) {
  confirmDialog.querySelector("#confirm-title").textContent = title;
  confirmDialog.querySelector("#confirm-text").textContent = text;
  confirmDialog.returnValue = "cancel";
  confirmDialog.showModal();
  return new Promise((resolve) => {
    confirmDialog.addEventListener("close", () => resolve(confirmDialog.returnValue === "ok"), { once: true });
  });
}

function rawText(article) {
  return article.querySelector("template.raw")?.content.textContent ?? "";
}

async function act(fn) {
  showError("");
  try {
    await fn();
  } catch (err) {
    showError(err.message);
  }
  await refresh();
}

function beginEdit(article) {
  if (editing) return;
  const body = article.querySelector(".msg-body");
  const box = document.createElement("div");
  box.className = "edit-box";
  const label = document.createElement("label");
  label.className = "sr-only";
  label.textContent = `Edit message ${article.dataset.number}`;
  const area = document.createElement("textarea");
  // An edit left unsaved (closed tab, reload) comes back: kept per message in this browser.
  const draftKey = `rp-edit-draft:${sid}:${article.dataset.messageId}`;
  area.value = localStorage.getItem(draftKey) ?? rawText(article);
  area.addEventListener("input", () => {
    try {
      localStorage.setItem(draftKey, area.value);
    } catch {
      // storage full or disabled: the draft is not kept
    }
  });
  area.rows = Math.min(20, Math.max(3, area.value.split("\n").length + 1));
  label.append(area);
  const save = document.createElement("button");
  save.type = "button";
  save.className = "primary";
  save.textContent = "Save";
  const cancel = document.createElement("button");
  cancel.type = "button";
  cancel.textContent = "Cancel";
  box.append(label, save);
  let saveRegen = null;
  if (article.dataset.lastUser) {
    // Your last message: save it and write the reply to it again, in one step.
    saveRegen = document.createElement("button");
    saveRegen.type = "button";
    saveRegen.textContent = "Save and regenerate";
    box.append(saveRegen);
  }
  box.append(cancel);
  body.hidden = true;
  body.after(box);
  editing = article;
  setBusy(runningTurn);
  sendButton.disabled = true;
  area.focus();
  const finish = () => {
    box.remove();
    body.hidden = false;
    editing = null;
    sendButton.disabled = false;
    setBusy(runningTurn);
    article.querySelector('[data-action="edit"]')?.focus();
  };
  const forget = () => localStorage.removeItem(draftKey);
  cancel.addEventListener("click", () => {
    forget(); // Cancel really restores the original
    finish();
  });
  area.addEventListener("keydown", (e) => {
    if (e.key === "Escape") {
      e.preventDefault();
      forget();
      finish();
    } else if (e.key === "Enter" && (e.ctrlKey || e.metaKey) && !e.isComposing) {
      e.preventDefault();
      save.click();
    }
  });
  save.addEventListener("click", async () => {
    const text = area.value;
    forget();
    finish();
    await act(() => api("PUT", `/sessions/${encodeURIComponent(sid)}/messages/${article.dataset.number}`, { text }));
  });
  saveRegen?.addEventListener("click", async () => {
    const text = area.value;
    forget();
    finish();
    await start("/regenerate", { saveEdit: text });
  });
}

async function showMetrics(article, button) {
  const box = article.querySelector(".metrics");
  if (!box.hidden) {
    box.hidden = true;
    button.setAttribute("aria-expanded", "false");
    return;
  }
  try {
    const report = await api("GET", `/sessions/${encodeURIComponent(sid)}/metrics`);
    const reply = (report.replies || []).find((r) => r.turnId === article.dataset.turnId);
    box.textContent = reply
      ? `${reply.route} · ${reply.tokensIn} tokens in, ${reply.tokensOut} out · ${reply.latencyMs} ms` +
        (reply.firstTokenMs != null ? ` (first token ${reply.firstTokenMs} ms)` : "") +
        (reply.cost != null ? ` · cost ${reply.cost}` : "") + ` · ${reply.calls.length} model call${reply.calls.length === 1 ? "" : "s"}`
      : "No metrics for this message.";
  } catch (err) {
    box.textContent = err.message;
  }
  box.hidden = false;
  button.setAttribute("aria-expanded", "true");
}

log.addEventListener("click", async (e) => {
  const option = e.target.closest(".reply-option");
  if (option) {
    sendText(option.dataset.text);
    return;
  }
  const button = e.target.closest("button[data-action]");
  if (!button) return;
  const article = button.closest("article");
  const n = article.dataset.number;
  const base = `/sessions/${encodeURIComponent(sid)}`;
  switch (button.dataset.action) {
    case "copy": {
      const text = rawText(article);
      try {
        await navigator.clipboard.writeText(text);
        toast("Copied");
      } catch {
        toast("Copy is not allowed here; select the text instead");
      }
      break;
    }
    case "edit":
      beginEdit(article);
      break;
    case "swipe-left":
    case "swipe-right":
      await act(() => api("POST", `${base}/swipe`, { direction: button.dataset.action === "swipe-left" ? "left" : "right" }));
      document.querySelector(`#m${n} [data-action="${button.dataset.action}"]:not(:disabled)`)?.focus();
      break;
    case "metrics":
      await showMetrics(article, button);
      break;
    case "regenerate":
      await start("/regenerate", {});
      break;
    case "continue":
      await start("/continue", {});
      break;
    case "branch":
      try {
        const made = await api("POST", `${base}/branch`, { at: n });
        window.location.href = `/s/${encodeURIComponent(made.branch.sessionId)}`;
      } catch (err) {
        showError(err.message);
      }
      break;
    case "delete":
      if (await ask("Delete messages?", `Delete message #${n} and every message after it?`)) {
        await act(() => api("DELETE", `${base}/messages/${n}`));
      }
      break;
    case "delete-turn":
      if (await ask("Delete this turn?", "Delete the turn that did not finish?")) {
        await act(() => api("DELETE", `${base}/messages/${encodeURIComponent(article.dataset.turnId)}`));
      }
      break;
  }
});

// ←/→ switch versions of the last reply, only when nothing is being typed.
document.addEventListener("keydown", (e) => {
  if ((e.key !== "ArrowLeft" && e.key !== "ArrowRight") || e.altKey || e.ctrlKey || e.metaKey) return;
  const target = e.target;
  if (target instanceof HTMLTextAreaElement || target instanceof HTMLInputElement || target instanceof HTMLSelectElement) return;
  if (draft.value || editing || runningTurn) return;
  const button = log.querySelector(`.swipe [data-action="${e.key === "ArrowLeft" ? "swipe-left" : "swipe-right"}"]:not(:disabled)`);
  if (button) {
    e.preventDefault();
    button.click();
  }
});

// -- header: Chat/Agent mode (idle only), the Session Wiki -----------------------------------------
for (const button of document.querySelectorAll("[data-mode]")) {
  button.addEventListener("click", async () => {
    if (button.getAttribute("aria-pressed") === "true" || runningTurn) return;
    showError("");
    try {
      await api("PUT", `/sessions/${encodeURIComponent(sid)}/mode`, { mode: button.dataset.mode });
      for (const b of document.querySelectorAll("[data-mode]")) b.setAttribute("aria-pressed", String(b === button));
      toast(`${button.textContent} mode from the next turn`);
    } catch (err) {
      showError(err.message);
    }
  });
}
wireWiki(sid);

// The Writer's route for this story: provider/model[/effort], "follow" (the conversation's) or "default".
function routeText(route) {
  if (!route) return "the global default";
  if (route.followConversation) return "follows the conversation's route";
  return [route.provider, route.model, route.reasoningEffort].filter(Boolean).join("/");
}
document.getElementById("writer-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  showError("");
  try {
    const out = await api("PUT", `/sessions/${encodeURIComponent(sid)}/writer-route`, { route: e.target.elements.route.value.trim() });
    document.getElementById("writer-route").textContent = routeText(out.writerRoute);
    e.target.closest("details").open = false;
    toast("The Writer's route applies from the next turn");
  } catch (err) {
    showError(err.message);
  }
});

// Messages with an unsaved edit kept from before say so (Edit brings it back).
function markDrafts() {
  for (const article of document.querySelectorAll("#messages article[data-message-id]")) {
    if (localStorage.getItem(`rp-edit-draft:${sid}:${article.dataset.messageId}`) === null) continue;
    const head = article.querySelector(".msg-head .meta");
    if (head && !head.querySelector(".draft-mark")) {
      const mark = document.createElement("span");
      mark.className = "draft-mark";
      mark.textContent = " · unsaved edit";
      head.append(mark);
    }
  }
}
markDrafts();
new MutationObserver(markDrafts).observe(log, { childList: true });
highlightDialogue(document.getElementById("messages"));
setBusy(runningTurn);
toBottom();
chat.dataset.ready = "true";
