// The Session Wiki: a full-height modal with six views (card, lorebooks, persona, preset, styles,
// state). Bound assets are read-only; a missing binding offers "select and bind", which sends
// only that kind's id(s) as one revision-checked profile change.
import { api } from "./api.js";

const FIELD = { card: "card", lorebooks: "lorebooks", persona: "persona", preset: "preset", styles: "writingStyles" };

function wireTabs(body) {
  const tabs = [...body.querySelectorAll('[role="tab"]')];
  const select = (tab) => {
    for (const t of tabs) {
      const on = t === tab;
      t.setAttribute("aria-selected", String(on));
      t.tabIndex = on ? 0 : -1;
      document.getElementById(t.getAttribute("aria-controls")).hidden = !on;
    }
    tab.focus();
  };
  for (const tab of tabs) {
    tab.addEventListener("click", () => select(tab));
    tab.addEventListener("keydown", (e) => {
      const i = tabs.indexOf(tab);
      if (e.key === "ArrowRight") select(tabs[(i + 1) % tabs.length]);
      else if (e.key === "ArrowLeft") select(tabs[(i - 1 + tabs.length) % tabs.length]);
      else if (e.key === "Home") select(tabs[0]);
      else if (e.key === "End") select(tabs[tabs.length - 1]);
      else return;
      e.preventDefault();
    });
  }
}

export async function openWiki(sid, view) {
  const dialog = document.getElementById("wiki");
  const slot = document.getElementById("wiki-slot");
  if (!dialog.open) {
    const loading = document.createElement("p");
    loading.textContent = "Loading…";
    slot.replaceChildren(loading); // never the last opening's views
    dialog.showModal();
  }
  const r = await fetch(`/s/${encodeURIComponent(sid)}/wiki`, { credentials: "same-origin" });
  const body = new DOMParser().parseFromString(await r.text(), "text/html").getElementById("wiki-body");
  slot.replaceChildren(document.adoptNode(body));
  wireTabs(body);
  (view ? body.querySelector(`#tab-${view}`) : body.querySelector('[role="tab"]'))?.click();
  for (const button of body.querySelectorAll(".reselect")) {
    button.addEventListener("click", () => {
      const form = body.querySelector(`form[data-bind="${button.dataset.for}"]`);
      form.hidden = false;
      button.hidden = true;
      form.querySelector("input, select").focus();
    });
  }
  for (const form of body.querySelectorAll("form.bind")) {
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const key = form.dataset.bind;
      const picked = new FormData(form).getAll("asset");
      const value = key === "lorebooks" || key === "styles" ? picked : picked[0];
      try {
        await api("PATCH", `/sessions/${encodeURIComponent(sid)}/profile`, {
          patch: { resources: { [FIELD[key]]: value } },
          revision: Number(body.dataset.revision),
        });
        await openWiki(sid, key);
      } catch (err) {
        const error = body.querySelector("#wiki-error");
        error.textContent = err.message;
        error.hidden = false;
      }
    });
  }
}

export function wireWiki(sid) {
  const dialog = document.getElementById("wiki");
  const opener = document.getElementById("open-wiki");
  opener.addEventListener("click", () => openWiki(sid));
  document.getElementById("close-wiki").addEventListener("click", () => dialog.close());
  dialog.addEventListener("close", () => opener.focus());
}
