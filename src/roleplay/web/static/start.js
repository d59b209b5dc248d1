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
