"""The JavaScript the gateway runs inside the platform's page (``execute_async_script``).

Every platform call is a ``fetch`` made by the page itself, with ``credentials: "include"``: the firewall
in front of the platform only lets through requests that carry the token its page script obtained, and
it blocks clients that do not look like a browser (PLATFORM.md, "Sign-in and the firewall").
"""

from __future__ import annotations

# arguments: [requests, timeoutMs, packMin, callback]; each request {url, method, body (a JSON text or
# null), headers}. Answers one {status, contentType, text, error, retryAfter} per request, in order
# (retryAfter: the answer's Retry-After header, or null). All requests run at once (Promise.all): 30 feed
# pages cost about one round trip. Each fetch is aborted after timeoutMs and then reports status 0 with
# error "timeout"; a network failure reports status 0 with its message. A URL the browser cannot parse is
# never fetched: it reports status 0 with an error starting "refused:" (a bug of ours, not an outage).
# A body is read as UTF-8, as Response.text() does.
#
# When the bodies hold packMin bytes or more, the answers come back packed instead: {packed: base64 of a
# gzip of one frame per answer, in the order they arrived}, a frame being the JSON line
# [index, status, contentType, error, byteLength, retryAfter] and then the body's bytes as they came
# (``page_fetch.unpack``). Getting a large result out of the browser is slow (Chromium, chromedriver and
# Selenium each re-encode it as JSON: about 13 MB/s here, 70 ms for 30 feed pages), while gzip
# (CompressionStream) and base64 (FileReader) are native and shrink the platform's JSON about ninefold.
# Each body goes to the compressor as soon as it arrives, so packing overlaps the wait for the slower
# ones. A batch of one request is packed only once its answer turns out large (setting up the compressor
# costs a single small answer about 1.3 ms, and most calls are one small answer). Without
# CompressionStream, or if packing fails, the answers come as they are.
FETCH_ALL = """
var requests = arguments[0], timeoutMs = arguments[1], packMin = arguments[2];
var done = arguments[arguments.length - 1];
var pack = null;  // {writer, blob, encoder, broken} while the bodies are being packed
function startPack() {
  if (packMin > 0 && typeof CompressionStream === "function") {
    try {
      var gzip = new CompressionStream("gzip");
      pack = {writer: gzip.writable.getWriter(), blob: new Response(gzip.readable).blob(),
              encoder: new TextEncoder(), broken: false};
      pack.blob.catch(function () {});
    } catch (e) {
      pack = null;
    }
  }
}
if (requests.length > 1) { startPack(); }
function put(bytes) {
  pack.writer.write(bytes).catch(function () { pack.broken = true; });
}
function packOne(i, a) {
  if (pack === null || pack.broken) { return; }
  try {
    var size = a.body ? a.body.byteLength : 0;
    put(pack.encoder.encode(JSON.stringify([i, a.status, a.contentType, a.error, size, a.retryAfter]) + "\\n"));
    if (size) { put(new Uint8Array(a.body)); }
  } catch (e) {
    pack.broken = true;
  }
}
function refused(i, e) {
  var a = {status: 0, contentType: "", body: null, error: "refused: " + String((e && e.message) || e),
           retryAfter: null};
  packOne(i, a);
  return Promise.resolve(a);
}
function one(r, i) {
  try { new URL(r.url); } catch (e) { return refused(i, e); }
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
      return resp.arrayBuffer().then(function (body) {
        return {status: resp.status, contentType: resp.headers.get("content-type") || "", body: body,
                error: null, retryAfter: resp.headers.get("retry-after")};
      });
    })
    .catch(function (e) {
      return {status: 0, contentType: "", body: null, retryAfter: null,
              error: ctrl.signal.aborted ? "timeout" : String((e && e.message) || e)};
    })
    .then(function (a) { packOne(i, a); return a; })
    .finally(function () { clearTimeout(timer); });
}
function plain(answers) {
  var decoder = new TextDecoder();
  return answers.map(function (a) {
    return {status: a.status, contentType: a.contentType, text: a.body ? decoder.decode(a.body) : "",
            error: a.error, retryAfter: a.retryAfter};
  });
}
function finish(answers) {
  var size = 0;
  answers.forEach(function (a) { size += a.body ? a.body.byteLength : 0; });
  if (pack === null && size >= packMin && requests.length === 1) {
    startPack();
    answers.forEach(function (a, i) { packOne(i, a); });
  }
  if (pack === null || pack.broken || size < packMin) {
    if (pack !== null) { pack.writer.abort().catch(function () {}); }
    done(plain(answers));
    return;
  }
  pack.writer.close().catch(function () {});
  pack.blob.then(function (blob) {
    var reader = new FileReader();
    reader.onload = function () {
      var url = String(reader.result);
      done(pack.broken ? plain(answers) : {packed: url.slice(url.indexOf(",") + 1)});
    };
    reader.onerror = function () { done(plain(answers)); };
    reader.readAsDataURL(blob);
  }, function () { done(plain(answers)); });
}
Promise.all(requests.map(one)).then(finish).catch(function (e) { done({error: String(e)}); });
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
# ``invalid``: the browser itself did not submit the form, because a field we typed into fails the form's
# own rules (an email input given no address): the field's type and the browser's words. Only for a form
# that lets the browser validate it (no ``novalidate``), where nothing was sent and nothing will be; a field
# of the page's own that holds the form back is left to the time-out, as before.
LOGIN_STATE = """
function text(sel) { var el = document.querySelector(sel); return el ? (el.textContent || "").trim() : ""; }
var challenge = document.querySelector(
  "#two-factor, [name=otp], [autocomplete=one-time-code], iframe[src*=captcha], .g-recaptcha, " +
  ".h-captcha, [data-sitekey], #captcha");
var password = document.querySelector("#password");
var form = password && password.form;
var bad = form && !form.noValidate ?
  [document.querySelector("#email"), password].filter(function (el) { return el && el.matches(":invalid"); })[0]
  : null;
return {challenge: challenge ? (challenge.id || challenge.tagName.toLowerCase()) : null,
        error: text("#login-error"),
        invalid: bad ? {type: bad.type, message: bad.validationMessage} : null};
"""
