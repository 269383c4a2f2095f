"""The JavaScript the gateway runs inside the platform's page (``execute_async_script``).

Every platform call is a ``fetch`` made by the page itself, with ``credentials: "include"``: the firewall
in front of the platform only lets through requests that carry the token its page script obtained, and
it blocks clients that do not look like a browser (PLATFORM.md, "Sign-in and the firewall").
"""

from __future__ import annotations

# arguments: [requests, timeoutMs, callback]; each request {url, method, body (a JSON text or null),
# headers}. Answers one {status, contentType, text, error} per request, in order. All requests run at
# once (Promise.all): 30 feed pages cost about one round trip. Each fetch is aborted after timeoutMs and
# then reports status 0 with error "timeout"; a network failure reports status 0 with its message.
FETCH_ALL = """
var requests = arguments[0], timeoutMs = arguments[1], done = arguments[arguments.length - 1];
function one(r) {
  var ctrl = new AbortController();
  var timer = setTimeout(function () { ctrl.abort(); }, timeoutMs);
  var headers = Object.assign({"accept": "application/json"}, r.headers || {});
  var init = {method: r.method, credentials: "include", cache: "no-store", redirect: "follow",
              signal: ctrl.signal, headers: headers};
  if (r.body !== null && r.body !== undefined) {
    init.body = r.body;
    headers["content-type"] = "application/json";
  }
  return fetch(r.url, init)
    .then(function (resp) {
      return resp.text().then(function (text) {
        return {status: resp.status, contentType: resp.headers.get("content-type") || "", text: text,
                error: null};
      });
    })
    .catch(function (e) {
      return {status: 0, contentType: "", text: "",
              error: ctrl.signal.aborted ? "timeout" : String((e && e.message) || e)};
    })
    .finally(function () { clearTimeout(timer); });
}
Promise.all(requests.map(one)).then(done, function (e) { done({error: String(e)}); });
"""

# arguments: [timeoutMs, callback]. Waits until the page's firewall script has obtained its token, then
# answers {ok, buildId, error}. The real firewall (AWS WAF) exposes AwsWafIntegration.getToken(); the
# stand-in resolves window.__fwReadyPromise. A page with neither is taken as ready once loaded (Selenium
# returns from get() after the load event). buildId comes from the page's __NEXT_DATA__.
WAIT_READY = """
var timeoutMs = arguments[0], done = arguments[arguments.length - 1];
function buildId() {
  var el = document.getElementById("__NEXT_DATA__");
  if (!el) { return null; }
  try { return JSON.parse(el.textContent).buildId || null; } catch (e) { return null; }
}
var ready;
if (window.AwsWafIntegration && typeof window.AwsWafIntegration.getToken === "function") {
  ready = Promise.resolve(window.AwsWafIntegration.getToken());
} else if (window.__fwReadyPromise) {
  ready = window.__fwReadyPromise;
} else {
  ready = Promise.resolve(true);
}
var timer = new Promise(function (_, reject) {
  setTimeout(function () { reject(new Error("timeout")); }, timeoutMs);
});
Promise.race([ready, timer]).then(
  function () { done({ok: true, buildId: buildId(), error: null}); },
  function (e) { done({ok: false, buildId: buildId(), error: String((e && e.message) || e)}); });
"""

# What the login page shows after submitting: the gateway polls this (bounded) while waiting for the
# ``auth_token`` cookie. A two-factor prompt or a captcha means the login cannot finish unattended.
LOGIN_STATE = """
function text(sel) { var el = document.querySelector(sel); return el ? (el.textContent || "").trim() : ""; }
var challenge = document.querySelector(
  "#two-factor, [name=otp], [autocomplete=one-time-code], iframe[src*=captcha], .g-recaptcha, " +
  ".h-captcha, [data-sitekey], #captcha");
return {challenge: challenge ? (challenge.id || challenge.tagName.toLowerCase()) : null,
        error: text("#login-error")};
"""
