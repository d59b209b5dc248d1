// "Start the sample story": the bundled sample card, imported on first use, opened at once.
import { api, toast } from "./api.js";

for (const button of document.querySelectorAll("[data-start-sample]")) {
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const made = await api("POST", "/sessions", { sample: true });
      window.location.href = `/s/${encodeURIComponent(made.sessionId)}`;
    } catch (err) {
      toast(err.message);
      button.disabled = false;
    }
  });
}

// Step 1's writing styles apply in the order listed: ↑ ↓ move one (the form submits in DOM order).
for (const button of document.querySelectorAll(".style-order [data-move]")) {
  button.addEventListener("click", () => {
    const row = button.closest("li");
    const sibling = button.dataset.move === "up" ? row.previousElementSibling : row.nextElementSibling;
    if (!sibling) return;
    if (button.dataset.move === "up") sibling.before(row);
    else sibling.after(row);
    button.focus();
  });
}

// Archive (never deletes: the story leaves the list and stays under "archived") and unarchive.
for (const button of document.querySelectorAll("[data-archive]")) {
  button.addEventListener("click", async () => {
    try {
      await api("POST", `/sessions/${encodeURIComponent(button.dataset.archive)}/${button.dataset.undo === "true" ? "unarchive" : "archive"}`);
      window.location.reload();
    } catch (err) {
      toast(err.message);
    }
  });
}
