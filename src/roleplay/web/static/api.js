// The JSON API from the pages: one error shape ({code, message}) for every failure.

export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.code = body && body.code ? body.code : `http.${status}`;
    this.details = body ? body.details : undefined;
  }
}

export async function api(method, path, body, extraHeaders = {}) {
  const init = { method, headers: { Accept: "application/json", ...extraHeaders }, credentials: "same-origin" };
  if (body instanceof FormData) {
    init.body = body;
  } else if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(`/api/v1${path}`, init);
  const text = await r.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { message: text };
  }
  if (!r.ok) {
    const err = data && data.error ? data.error : data;
    throw new ApiError(r.status, err);
  }
  return data;
}

let toastTimer = null;

export function toast(message) {
  const el = document.getElementById("toast");
  if (!el) return;
  el.textContent = message;
  el.classList.add("shown");
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => el.classList.remove("shown"), 4000);
}

// Enter sends, but never while an input method is composing (CJK IME: Enter confirms the text).
export function isSendKey(event) {
  return event.key === "Enter" && !event.shiftKey && !event.isComposing && event.keyCode !== 229;
}
