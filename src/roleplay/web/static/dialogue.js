// Dialogue inside paired quotes is highlighted with the CSS Custom Highlight API (no DOM change,
// so copying and screen readers see the text as written). Browsers without it get <span
// class="dialogue"> wrappers instead, which look the same and are equally inert.
const PAIRS = /"[^"\n]{1,2000}"|“[^”\n]{1,2000}”|「[^」\n]{1,2000}」|『[^』\n]{1,2000}』|«[^»\n]{1,2000}»/g;
const supported = typeof CSS !== "undefined" && "highlights" in CSS && typeof Highlight !== "undefined";
const ranges = new Map(); // body element -> its ranges, so a repaint drops the old ones

function textNodes(root) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
    acceptNode: (n) => (n.parentElement && n.parentElement.closest("code, pre") ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT),
  });
  const out = [];
  while (walker.nextNode()) out.push(walker.currentNode);
  return out;
}

export function highlightDialogue(container) {
  if (!container) return;
  if (container.dataset.dialogue === "off") {
    // rp-dialogue-highlight is turned off on this server
    if (supported) CSS.highlights.delete("dialogue");
    return;
  }
  for (const [el] of ranges) if (!el.isConnected) ranges.delete(el);
  for (const body of container.querySelectorAll(".msg-body:not(.live-text)")) {
    const found = [];
    for (const node of textNodes(body)) {
      for (const m of node.data.matchAll(PAIRS)) found.push([node, m.index, m.index + m[0].length]);
    }
    if (supported) {
      ranges.set(
        body,
        found.map(([node, start, end]) => {
          const r = new Range();
          r.setStart(node, start);
          r.setEnd(node, end);
          return r;
        }),
      );
    } else {
      for (const [node, start, end] of found.reverse()) {
        const r = document.createRange();
        r.setStart(node, start);
        r.setEnd(node, end);
        const span = document.createElement("span");
        span.className = "dialogue";
        r.surroundContents(span);
      }
    }
  }
  if (supported) CSS.highlights.set("dialogue", new Highlight(...[...ranges.values()].flat()));
  document.documentElement.dataset.dialogue = supported ? "highlight-api" : "spans";
}
