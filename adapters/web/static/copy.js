// The copy button of a newly minted key: the one script of the dashboard (no inline script anywhere).
// Without JavaScript the button stays hidden and the key can be selected in its read-only field.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    var field = document.getElementById(button.getAttribute("data-copy"));
    var status = button.parentElement.querySelector(".copy-status");
    if (!field) { return; }
    button.hidden = false;
    button.addEventListener("click", function () {
      field.focus();
      field.select();
      var done = function () { if (status) { status.textContent = "Copied."; } };
      var failed = function () { if (status) { status.textContent = "Select the key and copy it by hand."; } };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(field.value).then(done, failed);
      } else {
        try { document.execCommand("copy") ? done() : failed(); } catch (e) { failed(); }
      }
    });
  });
});
