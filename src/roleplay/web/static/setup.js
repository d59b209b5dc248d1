// Step 2 of the new-story setup: send the choices of both steps to the API, then open the story.
import { api } from "./api.js";

const form = document.getElementById("opening");
const error = document.getElementById("setup-error");
const custom = document.getElementById("opening-text");

custom.addEventListener("input", () => {
  if (custom.value) form.querySelector('input[value="custom"]').checked = true;
});

form.addEventListener("submit", async (e) => {
  e.preventDefault();
  const choice = JSON.parse(form.dataset.choice);
  const picked = new FormData(form).get("opening") || "skip";
  const body = { ...choice, title: form.elements.title.value || undefined };
  // The choice says null for a kind left out and has no key for the default: sent as it is.
  if (String(picked).startsWith("card:")) {
    body.opening = "card";
    body.openingIndex = Number(String(picked).slice(5));
  } else if (picked === "custom") {
    body.opening = "custom";
    body.openingText = custom.value;
  } else {
    body.opening = "skip";
  }
  const button = form.querySelector('button[type="submit"]');
  button.disabled = true;
  error.hidden = true;
  try {
    const made = await api("POST", "/sessions", body);
    window.location.href = `/s/${encodeURIComponent(made.sessionId)}`;
  } catch (err) {
    error.textContent = err.message;
    error.hidden = false;
    button.disabled = false;
  }
});
